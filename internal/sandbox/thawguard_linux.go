package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"mcpbox/internal/cgroup"
)

// A paused sandbox must die with mcpbox, but on cgroup v1 a frozen task
// acts on no signal, the init's parent-death SIGKILL included, until it is
// thawed. So while any sandbox is paused on v1, mcpbox keeps a thaw guard:
// this binary re-executed outside every sandbox, holding the read end of
// a pipe. mcpbox writes "+FILE" before it freezes a sandbox and "-FILE"
// once it thawed or ended it (FILE as cgroup.ThawFiles gives it); when the
// pipe ends, because mcpbox exited or was killed, the guard thaws what is
// still listed, the pending SIGKILLs act, and it exits. If the guard is
// killed as well, the next mcpbox's cgroup.CleanupStale reclaims the
// frozen sandbox.

// thawGuardArg makes this binary the thaw guard (see Main).
const thawGuardArg = "__mcpbox_thaw_guard__"

// guard is the thaw guard of this process, started by the first pause
// that needs one.
var guard thawGuard

type thawGuard struct {
	mu    sync.Mutex
	cmd   *exec.Cmd       // guarded by mu; nil until started
	w     *os.File        // guarded by mu: the guard's stdin
	files map[string]bool // guarded by mu: what the guard must thaw
}

// watch has the guard thaw files should mcpbox die before unwatch; it
// starts the guard if none runs.
func (g *thawGuard) watch(files []string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.files == nil {
		g.files = map[string]bool{}
	}
	for _, f := range files {
		g.files[f] = true
	}
	if g.w != nil && g.send('+', files) == nil {
		return nil
	}
	// No guard, or it died: start one and tell it everything.
	g.stop()
	if err := g.start(); err != nil {
		for _, f := range files {
			delete(g.files, f)
		}
		return err
	}
	var all []string
	for f := range g.files {
		all = append(all, f)
	}
	return g.send('+', all)
}

// unwatch tells the guard the files need no thawing any more.
func (g *thawGuard) unwatch(files []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range files {
		delete(g.files, f)
	}
	if g.w != nil && g.send('-', files) != nil {
		g.stop() // the next watch starts another
	}
}

// send writes one line per file. Preconditions: g.mu held, g.w not nil.
func (g *thawGuard) send(op byte, files []string) error {
	var b strings.Builder
	for _, f := range files {
		b.WriteByte(op)
		b.WriteString(f)
		b.WriteByte('\n')
	}
	_, err := g.w.WriteString(b.String())
	return err
}

// start runs the guard. Preconditions: g.mu held, no guard running.
func (g *thawGuard) start() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("starting the thaw guard: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:  "/proc/self/exe",
		Args:  []string{"mcpbox-thaw-guard", thawGuardArg},
		Env:   []string{}, // none of mcpbox's environment, which may hold secrets
		Stdin: r,
		// Its own process group: a Ctrl-C meant for mcpbox's group must
		// not end the guard first.
		SysProcAttr: &unix.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting the thaw guard: %w", err)
	}
	g.cmd, g.w = cmd, w
	return nil
}

// stop closes the pipe to a guard that is no longer needed or died, and
// reaps it. Preconditions: g.mu held.
func (g *thawGuard) stop() {
	if g.cmd == nil {
		return
	}
	g.w.Close()
	_ = g.cmd.Wait() // the guard exits at the end of its stdin
	g.cmd, g.w = nil, nil
}

// runThawGuard is the guard's main: it reads +FILE and -FILE lines until
// its stdin ends, then thaws the files still listed.
func runThawGuard() int {
	// Signals meant for mcpbox (a terminal's Ctrl-C, a service manager's
	// SIGTERM to the group) must not end the guard before mcpbox.
	signal.Ignore(unix.SIGINT, unix.SIGHUP, unix.SIGTERM, unix.SIGQUIT)
	files := map[string]bool{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		switch line[0] {
		case '+':
			files[line[1:]] = true
		case '-':
			delete(files, line[1:])
		}
	}
	for f := range files {
		// A file of a sandbox already gone no longer exists: nothing to do.
		_ = cgroup.ThawFile(f)
	}
	return 0
}
