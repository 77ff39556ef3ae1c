package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"mcpbox/internal/egress"
)

// egressDirPrefix names the host dirs that hold the sandboxes' proxy
// sockets: mcpbox-egress-<owner>-<random>, where owner is mcpbox's pid and
// start time (see procOwner), so that a crashed mcpbox's dirs can be told
// from a live one's, even once its pid is reused.
const egressDirPrefix = "mcpbox-egress-"

// startEgress runs the sandbox's egress proxy on a fresh unix socket and
// returns the mount that puts the socket into the sandbox. Preconditions:
// the Spec has egress rules or forwards.
func (sb *Sandbox) startEgress() (Mount, error) {
	n := sb.spec.Network
	// A unix socket path holds at most 107 bytes: a long $TMPDIR falls
	// back to /tmp.
	base := os.TempDir()
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, egressDirPrefix+selfOwner()+"-")
	if err != nil {
		return Mount{}, fmt.Errorf("creating egress socket dir: %w", err)
	}
	sb.egressDir = dir
	sock := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return Mount{}, fmt.Errorf("listening on the egress socket: %w", err)
	}
	p, err := egress.New(egress.Options{
		SandboxID: sb.ID, Rules: n.Rules, Forwards: n.Forwards,
		Limits: n.Limits, Resolver: n.Resolver, Log: n.Log, Opened: n.Opened,
		Injector: n.Injector, CA: n.CA,
		// Only the init hands connections over (it started before this).
		HandoverPID: sb.cmd.Process.Pid,
	})
	if err != nil {
		ln.Close()
		return Mount{}, fmt.Errorf("starting egress proxy: %w", err)
	}
	sb.proxy = p
	go func() { _ = p.Serve(ln) }()
	real, err := filepath.EvalSymlinks(sock)
	if err != nil {
		return Mount{}, err
	}
	return Mount{Source: real, Target: proxySocket}, nil
}

// stopEgress closes the proxy and removes its socket dir.
func (sb *Sandbox) stopEgress() {
	if sb.proxy != nil {
		_ = sb.proxy.Close()
	}
	if sb.egressDir != "" {
		_ = os.RemoveAll(sb.egressDir)
	}
}

// CleanupStaleDirs removes the host dirs (egress proxy sockets) that
// sandboxes of mcpbox processes no longer running left behind, and returns
// their paths. It only touches dirs of the calling user, and never one of
// a live mcpbox.
func CleanupStaleDirs() ([]string, error) {
	var removed []string
	var errs []error
	for _, d := range staleEgressDirs() {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing stale egress dir: %w", err))
			continue
		}
		removed = append(removed, d)
	}
	return removed, errors.Join(errs...)
}

func cleanupStaleEgress() { _, _ = CleanupStaleDirs() }

// staleEgressDirs lists the egress dirs in $TMPDIR and /tmp whose owner
// is gone.
func staleEgressDirs() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), egressDirPrefix+"*"))
	if os.TempDir() != "/tmp" {
		more, _ := filepath.Glob(filepath.Join("/tmp", egressDirPrefix+"*"))
		dirs = append(dirs, more...)
	}
	var stale []string
	for _, d := range dirs {
		// Only real dirs of ours: /tmp is anyone's to plant names in.
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		owner, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(d), egressDirPrefix), "-")
		if ok && ownerGone(owner) {
			stale = append(stale, d)
		}
	}
	return stale
}

// selfOwner is this process as an owner: "PID.STARTTIME", or "PID" if
// /proc cannot say when it started.
func selfOwner() string {
	pid := os.Getpid()
	if start, ok := procStart(pid); ok {
		return strconv.Itoa(pid) + "." + start
	}
	return strconv.Itoa(pid)
}

// ownerGone reports whether the process an owner ("PID.STARTTIME" or
// "PID") names has exited: no such pid, a zombie, or another process that
// started later under the same pid. An owner it cannot parse is not gone:
// that dir is not ours to remove.
func ownerGone(owner string) bool {
	pidStr, start, withStart := strings.Cut(owner, ".")
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	now, ok := procStart(pid)
	if !ok {
		return false
	}
	return now == "Z" || (withStart && now != start)
}

// procStart returns the start time of pid in clock ticks after boot (field
// 22 of /proc/PID/stat), or "Z" for a zombie.
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name, field 2, is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", false
	}
	if f[0] == "Z" || f[0] == "X" { // field 3, the state: exited
		return "Z", true
	}
	return f[19], true // field 22
}
