package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"mcpbox/internal/egress"
)

// egressDirPrefix names the host dirs that hold the sandboxes' proxy
// sockets: mcpbox-egress-<pid of mcpbox>-<random>.
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
	dir, err := os.MkdirTemp(base, egressDirPrefix+strconv.Itoa(os.Getpid())+"-")
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

// cleanupStaleEgress removes socket dirs left by mcpbox processes that
// died without cleaning up (their pid no longer exists).
func cleanupStaleEgress() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), egressDirPrefix+"*"))
	if os.TempDir() != "/tmp" {
		more, _ := filepath.Glob(filepath.Join("/tmp", egressDirPrefix+"*"))
		dirs = append(dirs, more...)
	}
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), egressDirPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}
