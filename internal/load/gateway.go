//go:build linux

package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	inst "mcpbox/internal/instance"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// gateway is the mcpbox serve under load: one Run started, or one given.
type gateway struct {
	mcpbox   string
	url      string
	stateDir string
	pid      int      // 0: not sampled from /proc
	tokens   []string // per client; none: no clients
	// roots are the paths whose mounts count as the gateway's own.
	roots []string

	cmd  *exec.Cmd // nil for a given gateway
	out  *serveLog
	done chan struct{} // closed once cmd has been waited for
	err  error         // cmd.Wait's result, read after done
}

// serveLog collects serve's output and spots its serving line.
type serveLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer // guarded by mu
	sent bool         // guarded by mu
	url  chan string
}

var servingRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^mcpbox: serving MCP on (http://[^\s]+/mcp)\r?$`)
})

func (l *serveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Keep the start and the last 64 KiB: a long run logs a lot.
	if l.buf.Len() > 1<<20 {
		b := append([]byte(nil), l.buf.Bytes()[l.buf.Len()-64<<10:]...)
		l.buf.Reset()
		l.buf.Write(b)
	}
	l.buf.Write(p)
	if !l.sent {
		if m := servingRE().FindSubmatch(l.buf.Bytes()); m != nil {
			l.sent = true
			l.url <- string(m[1])
		}
	}
	return len(p), nil
}

func (l *serveLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startGateway runs `mcpbox serve --http 127.0.0.1:0` on in's config and
// waits up to 2 minutes for it to listen.
func startGateway(ctx context.Context, o Options, in *instance) (*gateway, error) {
	g := &gateway{mcpbox: o.Mcpbox, stateDir: in.stateDir, tokens: in.tokens,
		roots: []string{in.dir}, out: &serveLog{url: make(chan string, 1)}, done: make(chan struct{})}
	args := append([]string{"serve", "--http", "127.0.0.1:0", "--config", in.config}, o.ServeFlags...)
	if os.Geteuid() != 0 && !hasDegraded(o.ServeFlags) {
		// Without root, cgroups need a delegated subtree (see docs/config.md).
		args = append(args, "--allow-degraded=cgroups")
	}
	g.cmd = exec.Command(o.Mcpbox, args...)
	g.cmd.Env = append(os.Environ(), in.env...)
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	g.cmd.Dir = in.dir
	// A driver killed outright takes its gateway along (best effort: the
	// signal follows the thread that started it).
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", o.Mcpbox, err)
	}
	g.pid = g.cmd.Process.Pid
	go func() { g.err = g.cmd.Wait(); close(g.done) }()
	select {
	case g.url = <-g.out.url:
		return g, nil
	case <-g.done:
		return nil, fmt.Errorf("mcpbox serve exited before listening: %v\n%s", g.err, g.out)
	case <-time.After(2 * time.Minute):
		err := errors.New("mcpbox serve printed no serving line within 2 minutes")
		g.kill()
		return nil, fmt.Errorf("%w\n%s", err, g.out)
	case <-ctx.Done():
		g.kill()
		return nil, ctx.Err()
	}
}

func hasDegraded(flags []string) bool {
	for _, f := range flags {
		if strings.HasPrefix(f, "--allow-degraded") || strings.HasPrefix(f, "-allow-degraded") {
			return true
		}
	}
	return false
}

func (g *gateway) kill() {
	_ = g.cmd.Process.Kill()
	<-g.done
}

// stop ends a gateway Run started with SIGTERM, as an operator would, and
// reports an exit other than 0 within 60 s.
func (g *gateway) stop() error {
	if g.cmd == nil {
		return nil
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		if g.err != nil {
			return fmt.Errorf("mcpbox serve after SIGTERM: %w\n%s", g.err, tail(g.out.String(), 4096))
		}
		return nil
	case <-time.After(60 * time.Second):
		g.kill()
		return fmt.Errorf("mcpbox serve did not stop within 60 s of SIGTERM\n%s", tail(g.out.String(), 4096))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// mcpboxCmd runs `mcpbox ARGS --state-dir DIR` and returns its stdout.
func (g *gateway) mcpboxCmd(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.mcpbox, append(args, "--state-dir", g.stateDir)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("mcpbox %s: %w: %s%s", strings.Join(args, " "), err,
			tail(stderr.String(), 2048), tail(stdout.String(), 2048))
	}
	return stdout.Bytes(), nil
}

// adminSocket is the gateway's admin socket: its instance's, by pid, or
// the one instance on the state dir when the pid is not known.
func (g *gateway) adminSocket() string {
	if g.pid != 0 {
		return inst.SocketPath(g.stateDir, g.pid)
	}
	socks, _ := filepath.Glob(filepath.Join(inst.Dir(g.stateDir), "*.sock"))
	if len(socks) == 1 {
		return socks[0]
	}
	return inst.SocketPath(g.stateDir, 0) // none or several: the dial fails and says so
}

// admin sends one request to the gateway's admin socket (the protocol of
// `mcpbox ps`), which is cheaper to ask every second than a process.
func (g *gateway) admin(op string, reply any) error {
	if g.stateDir == "" {
		return errors.New("no state dir known")
	}
	conn, err := net.DialTimeout("unix", g.adminSocket(), 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "{\"op\":%q}\n", op); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return err
	}
	var r struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return err
	}
	if !r.OK {
		return fmt.Errorf("admin %s: %s", op, r.Error)
	}
	return json.Unmarshal(line, reply)
}

// sandbox is a row of `mcpbox ps --json`, as much as the driver reads.
type sandbox struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Remote string `json:"remote"` // set: a remote server's connection, no sandbox
}

func (g *gateway) sandboxes() ([]sandbox, error) {
	var r struct {
		Sandboxes []sandbox `json:"sandboxes"`
	}
	err := g.admin("ps", &r)
	return r.Sandboxes, err
}

// live reports whether a sandbox in state may still hold processes, a
// cgroup or mounts (not yet "stopped" or "failed").
func live(state string) bool { return state == "running" || state == "paused" || state == "stopping" }

// goroutines asks the gateway for its goroutine count (admin op "stats");
// -1 when it does not answer it.
func (g *gateway) goroutines() int {
	var r struct {
		Goroutines int `json:"goroutines"`
	}
	if err := g.admin("stats", &r); err != nil {
		return -1
	}
	return r.Goroutines
}

// procStatus reads VmRSS (bytes) and Threads from /proc/PID/status.
func procStatus(pid int) (rss int64, threads int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "Threads":
			threads = int(n)
		}
	}
	return rss, threads
}

// procCPU returns pid's CPU time (user+system) in seconds, -1 if unknown.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command (which may hold spaces) in parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func countDir(dir string) int {
	es, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	return len(es)
}

// mounts counts the mounts of pid's mount namespace, all of them and those
// at or below one of roots (the run's temp dir: workspaces, overlays).
func mounts(pid int, roots []string) (all, own int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		all++
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		for _, r := range roots {
			if f[4] == r || strings.HasPrefix(f[4], r+"/") {
				own++
				break
			}
		}
	}
	return all, own
}

// cgroupParent returns the directory holding pid's sandbox cgroups:
// <hierarchy>/<pid's cgroup>/mcpbox (see package cgroup), in the hierarchy
// where pid's cgroup is the most specific, so that it is least shared
// with other mcpbox instances on the host ("" if there is none). The
// cgroups are named by the sandbox package's own ids, which `mcpbox ps`
// does not show, so they are counted, not matched.
func cgroupParent(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	best, depth := "", -1
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || strings.HasPrefix(parts[1], "name=") {
			continue
		}
		// mcpbox may have moved itself into the leaf mcpbox-self (v2).
		ctrl, path := parts[1], strings.TrimSuffix(parts[2], "/mcpbox-self")
		root := filepath.Join("/sys/fs/cgroup", ctrl)
		if ctrl == "" {
			root = "/sys/fs/cgroup/unified"
			if _, err := os.Stat(root); err != nil {
				root = "/sys/fs/cgroup"
			}
		}
		d := filepath.Join(root, path, "mcpbox")
		if _, err := os.Stat(d); err == nil && strings.Count(path, "/") > depth {
			best, depth = d, strings.Count(path, "/")
		}
	}
	return best
}

// ownCgroups counts the sandbox cgroups in dir that are the gateway's:
// those holding a process below pid, and those empty ones made since
// (a cgroup the gateway failed to remove). The cgroup parent is shared
// with other mcpbox instances on the host (tests running at the same
// time), whose live sandboxes must not count as this gateway's leaks. It
// returns -1 if dir cannot be read; without a pid, every subdir counts.
func ownCgroups(dir string, pid int, since time.Time) int {
	if pid <= 0 {
		return countSubdirs(dir)
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range es {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(filepath.Join(sub, "cgroup.procs"))
		if err != nil {
			continue
		}
		procs := strings.Fields(string(b))
		if len(procs) == 0 {
			if fi, err := os.Stat(sub); err == nil && !fi.ModTime().Before(since) {
				n++
			}
			continue
		}
		for _, p := range procs {
			if q, err := strconv.Atoi(p); err == nil && descends(q, pid) {
				n++
				break
			}
		}
	}
	return n
}

// descends reports whether process p is below ancestor.
func descends(p, ancestor int) bool {
	for range 64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return false
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			return false
		}
		pp, err := strconv.Atoi(f[1])
		if err != nil || pp <= 1 {
			return false
		}
		if pp == ancestor {
			return true
		}
		p = pp
	}
	return false
}

// countSubdirs counts the directories in dir; -1 if it cannot be read.
func countSubdirs(dir string) int {
	es, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range es {
		if e.IsDir() {
			n++
		}
	}
	return n
}
