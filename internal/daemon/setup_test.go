package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/specconv"
)

// setupRig is a setups with a clock the test moves and the audit
// records and admin-record changes it made.
type setupRig struct {
	st      *setups
	mu      sync.Mutex
	clock   time.Time
	records []audit.Record
	down    []map[string]string
}

func newSetupRig() *setupRig {
	r := &setupRig{clock: time.Unix(1_800_000_000, 0)}
	r.st = &setups{
		record:  func(rec audit.Record) { r.mu.Lock(); r.records = append(r.records, rec); r.mu.Unlock() },
		redact:  func(s string) string { return strings.ReplaceAll(s, "s3cret", "[REDACTED]") },
		changed: func(d map[string]string) { r.mu.Lock(); r.down = append(r.down, d); r.mu.Unlock() },
		now:     func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.clock },
	}
	return r
}

// newServeRig is newSetupRig with serve's context: due retries run in
// the background (pending.readyChan) until r.st.stop.
func newServeRig() *setupRig {
	r := newSetupRig()
	r.st.ctx, r.st.cancel = context.WithCancel(context.Background())
	return r
}

func (r *setupRig) advance(d time.Duration) { r.mu.Lock(); r.clock = r.clock.Add(d); r.mu.Unlock() }

// TestPendingServerRetries: an unavailable server fails every start with
// why (redacted, without its own name again); a start retries the setup
// only once retryEvery has passed since the last try; a setup that
// succeeds makes the server available and later starts launch it.
func TestPendingServerRetries(t *testing.T) {
	r := newSetupRig()
	gs := &gateway.Server{Name: "broken"}
	cause := errors.New("server broken: npm package @x/y: not found at https://user:s3cret@registry.example/")
	var setups int
	var fixed bool
	launched := 0
	setup := func(ctx context.Context) (*gateway.Server, error) {
		setups++
		if !fixed {
			return nil, errors.New("server broken: npm package @x/y: still not found")
		}
		return &gateway.Server{Name: "broken", Launch: func(context.Context, gateway.Scope) (*gateway.Process, error) {
			launched++
			return nil, nil
		}}, nil
	}
	r.st.unavailable(gs, &SetupError{Server: "broken", Err: cause}, setup)

	ctx := context.Background()
	_, err := gs.Launch(ctx, gateway.Scope{})
	if err == nil || !strings.Contains(err.Error(), "unavailable") || !strings.Contains(err.Error(), "npm package @x/y: not found at https://user:[REDACTED]@") ||
		strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "server broken:") || !strings.Contains(err.Error(), "a new session retries it") {
		t.Fatalf("first start: %v", err)
	}
	if !errors.Is(err, gateway.ErrNotSetUp) {
		t.Errorf("first start: %v does not say it started nothing (gateway.ErrNotSetUp): the gateway would count it as a crash", err)
	}
	if setups != 0 {
		t.Fatalf("the setup was retried %d times within retryEvery of the start", setups)
	}
	if why := r.st.Down()["broken"]; why != "npm package @x/y: not found at https://user:[REDACTED]@registry.example/" {
		t.Errorf("Down: %q", why)
	}

	r.advance(retryEvery)
	if _, err := gs.Launch(ctx, gateway.Scope{}); err == nil || !strings.Contains(err.Error(), "still not found") || !errors.Is(err, gateway.ErrNotSetUp) {
		t.Fatalf("start after retryEvery: %v, want the retry's error, as a start that started nothing", err)
	}
	if setups != 1 {
		t.Fatalf("setups after retryEvery: %d, want 1", setups)
	}
	r.advance(retryEvery / 2)
	gs.Launch(ctx, gateway.Scope{})
	if setups != 1 {
		t.Fatalf("a start within retryEvery of the last retry retried (%d setups)", setups)
	}

	fixed = true
	r.advance(retryEvery)
	if _, err := gs.Launch(ctx, gateway.Scope{}); err != nil || launched != 1 {
		t.Fatalf("start once the setup works: %v, launched %d", err, launched)
	}
	if _, err := gs.Launch(ctx, gateway.Scope{}); err != nil || launched != 2 || setups != 2 {
		t.Fatalf("start after the setup: %v, launched %d, setups %d", err, launched, setups)
	}
	if len(r.st.Down()) != 0 {
		t.Errorf("Down after the successful retry: %v", r.st.Down())
	}

	var phases []string
	for _, rec := range r.records {
		if rec.Event != audit.EventServerUnavailable || rec.Server != "broken" || strings.Contains(rec.Error, "s3cret") {
			t.Errorf("audit record %+v", rec)
		}
		phases = append(phases, rec.Detail["phase"]+":"+rec.Decision)
	}
	if got := strings.Join(phases, " "); got != "start: retry: retry:recovered" {
		t.Errorf("audit records' phase:decision = %q", got)
	}
	if n := len(r.down); n != 3 || len(r.down[n-1]) != 0 {
		t.Errorf("admin record changes: %v", r.down)
	}
}

// TestPendingServerCancelledRetry: a retry the start's context cut short
// is no new failure to record.
func TestPendingServerCancelledRetry(t *testing.T) {
	r := newSetupRig()
	gs := &gateway.Server{Name: "s"}
	r.st.unavailable(gs, &SetupError{Server: "s", Err: errors.New("server s: registry down")}, func(ctx context.Context) (*gateway.Server, error) {
		return nil, ctx.Err()
	})
	r.advance(retryEvery)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gs.Launch(ctx, gateway.Scope{}); err == nil || !strings.Contains(err.Error(), "registry down") {
		t.Fatalf("cancelled retry: %v, want the last real reason", err)
	}
	if len(r.records) != 1 {
		t.Errorf("a cancelled retry was recorded: %+v", r.records)
	}
}

// TestPendingServerRetryUnderWay: while one session's retry runs (a slow
// install), another session's start waits for its outcome without a
// retry of its own, and gives up when its own context ends instead of
// hanging until the install is done.
func TestPendingServerRetryUnderWay(t *testing.T) {
	r := newSetupRig()
	gs := &gateway.Server{Name: "slow"}
	release := make(chan struct{})
	var setups atomic.Int32
	started := make(chan struct{}, 1)
	r.st.unavailable(gs, &SetupError{Server: "slow", Err: errors.New("server slow: registry down")}, func(ctx context.Context) (*gateway.Server, error) {
		setups.Add(1)
		started <- struct{}{}
		select {
		case <-release:
		case <-time.After(time.Minute):
			return nil, errors.New("never released")
		}
		return &gateway.Server{Name: "slow", Launch: func(context.Context, gateway.Scope) (*gateway.Process, error) { return nil, nil }}, nil
	})
	r.advance(retryEvery)

	launch := func(ctx context.Context) <-chan error {
		ch := make(chan error, 1)
		go func() { _, err := gs.Launch(ctx, gateway.Scope{}); ch <- err }()
		return ch
	}
	first := launch(context.Background())
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first start did not retry the setup")
	}

	ctx, cancel := context.WithCancel(context.Background())
	gone := launch(ctx)
	waiting := launch(context.Background())
	cancel()
	select {
	case err := <-gone:
		if err == nil || !strings.Contains(err.Error(), "registry down") {
			t.Errorf("a start whose context ended during another's retry: %v, want the last reason", err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a start whose context ended still waited for another session's retry")
	}

	close(release)
	for name, ch := range map[string]<-chan error{"the retrying start": first, "the waiting start": waiting} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v, want the server the retry set up", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not return after the retry ended", name)
		}
	}
	if n := setups.Load(); n != 1 {
		t.Errorf("%d setups for one retry due, want 1", n)
	}
}

// TestUnavailableChangesArriveInOrder: two servers' changes made at once
// reach the admin record in the order they were made, so the list it
// keeps last is the current one (each change is a whole list).
func TestUnavailableChangesArriveInOrder(t *testing.T) {
	r := newSetupRig()
	var mu sync.Mutex
	var got []map[string]string
	blocked, release := make(chan struct{}), make(chan struct{})
	delivered := make(chan struct{}, 2)
	first := true
	r.st.changed = func(d map[string]string) {
		mu.Lock()
		wait := first
		first = false
		mu.Unlock()
		if wait { // hold the first change's delivery
			close(blocked)
			<-release
		}
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
		delivered <- struct{}{}
	}
	go r.st.fail("a", errors.New("server a: down"), "start")
	<-blocked
	go r.st.fail("b", errors.New("server b: down"), "start")
	// Unordered, b's list would be delivered now, before a's; give it
	// the chance, then let a's go.
	n := 0
	select {
	case <-delivered:
		n++
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	for ; n < 2; n++ {
		select {
		case <-delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("a change was never delivered")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if last := got[len(got)-1]; len(last) != 2 {
		t.Errorf("the admin record's last list is %v, want both servers (changes delivered %v)", last, got)
	}
}

// TestWiringLeavesOutFailedPackage: a server whose package did not
// install is unavailable, never run as its command says (npx would
// install inside the sandbox); the others are wired. When no server can
// be set up, wiring fails with each server's error.
func TestWiringLeavesOutFailedPackage(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  typo:
    command: [npx, -y, "@x/not-published"]
    tools: {allow: ["*"]}
  good:
    command: [sh, -c, "sleep 1"]
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	failed := map[string]error{"typo": errors.New("server typo: npm package @x/not-published: not found")}
	installs := 0
	w := wiring{c: c, opts: specconv.Options{Base: base, StateDir: t.TempDir()}, failed: failed,
		install: func(context.Context, *config.Server) (specconv.Package, error) {
			installs++
			return specconv.Package{}, errors.New("server typo: npm package @x/not-published: not found")
		}}
	r := newSetupRig()
	w.setups = r.st
	servers, err := w.servers()
	if err != nil || len(servers) != 2 {
		t.Fatalf("servers: %d, %v", len(servers), err)
	}
	if down := r.st.Down(); len(down) != 1 || !strings.Contains(down["typo"], "not found") {
		t.Fatalf("Down: %v", down)
	}
	r.advance(retryEvery)
	_, err = servers[0].Launch(context.Background(), gateway.Scope{})
	if err == nil || !strings.Contains(err.Error(), "unavailable") || installs != 1 {
		t.Fatalf("typo's start: %v after %d installs; want the retried install's failure", err, installs)
	}

	w.failed = map[string]error{"typo": failed["typo"], "good": errors.New("server good: image: pull refused")}
	w.setups = newSetupRig().st
	_, err = w.servers()
	if err == nil || !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), "pull refused") {
		t.Fatalf("no server set up: %v, want both reasons", err)
	}
	var se *SetupError
	if !errors.As(err, &se) {
		t.Errorf("no server set up: %T, want a *SetupError inside", err)
	}

	w.setups = nil // --strict
	w.failed = map[string]error{"typo": failed["typo"]}
	if _, err := w.servers(); !errors.As(err, &se) || se.Server != "typo" {
		t.Errorf("strict: %v, want typo's *SetupError", err)
	}
}

// TestWiringKeepsGroupsWhole: a group member whose package did not
// install is no unavailable member: the group's sandbox is built for all
// its members, so serve fails at its start as before.
func TestWiringKeepsGroupsWhole(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  a:
    command: [sh, -c, "sleep 1"]
    placement: group:g
    tools: {allow: ["*"]}
  b:
    command: [npx, -y, "@x/not-published"]
    placement: group:g
    tools: {allow: ["*"]}
  c:
    command: [sh, -c, "sleep 1"]
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	w := wiring{c: c, opts: specconv.Options{Base: t.TempDir(), StateDir: t.TempDir()},
		failed: map[string]error{"b": errors.New("server b: npm package @x/not-published: not found")}}
	w.setups = newSetupRig().st
	var se *SetupError
	if _, err := w.servers(); !errors.As(err, &se) || se.Server != "b" {
		t.Fatalf("servers: %v, want b's *SetupError", err)
	}
}

// TestInputNotDirIsUnavailable: a command server whose input is a file
// is unavailable, as one whose input is missing and as a package server
// with either: the host's state, not a config error that ends serve.
func TestInputNotDirIsUnavailable(t *testing.T) {
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "afile"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"./afile", "./missing"} {
		c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  a:
    command: [sh, -c, "sleep 1"]
    filesystem: {input: {source: `+src+`}}
    tools: {allow: ["*"]}
`))
		if err != nil {
			t.Fatal(err)
		}
		w := wiring{c: c, opts: specconv.Options{Base: base, StateDir: t.TempDir()}}
		w.setups = newSetupRig().st
		var se *SetupError
		if _, err := w.servers(); !errors.As(err, &se) || se.Server != "a" || !strings.Contains(err.Error(), strings.TrimPrefix(src, "./")) {
			t.Errorf("input %s: servers: %v, want a's *SetupError naming it", src, err)
		}
	}
}

// TestUnavailableReasonIsTerminalSafe: why a server is unavailable quotes
// a registry's text (here versions it lists) and is printed on terminals
// (serve's warning, mcpbox ps): its control characters are escaped, so no
// escape sequence (a clipboard write, a cleared line) or carriage return
// reaches the terminal, and the text is still there to read.
func TestUnavailableReasonIsTerminalSafe(t *testing.T) {
	r := newSetupRig()
	gs := &gateway.Server{Name: "broken"}
	listed := "1.0.0\r\x1b[2K\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\u202e, 1.0.1\u009b31m\x7f"
	cause := errors.New(`server broken: npm package x: no version matches "^2" (latest listed: ` + listed + ")")
	r.st.unavailable(gs, &SetupError{Server: "broken", Err: cause}, nil)
	_, err := gs.Launch(context.Background(), gateway.Scope{})
	if err == nil {
		t.Fatal("an unavailable server started")
	}
	why := r.st.Down()["broken"]
	r.mu.Lock()
	shown := []string{why, err.Error(), r.records[0].Error}
	r.mu.Unlock()
	for _, s := range shown {
		for _, c := range s {
			if c < 0x20 || c == 0x7f || c >= 0x80 && c < 0xa0 || c == '\u202e' {
				t.Errorf("control character %U in %q", c, s)
				break
			}
		}
	}
	if want := `1.0.0\x0d\x1b[2K\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\u202e, 1.0.1\u009b31m\x7f`; !strings.Contains(why, want) {
		t.Errorf("reason %q, want the listed versions escaped: %s", why, want)
	}
}

// TestMissingMountSourceUnavailable: a server whose mount source or
// input does not exist is unavailable, and the others are served; a
// start of it says why.
func TestMissingMountSourceUnavailable(t *testing.T) {
	base := t.TempDir()
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
sandbox: {require: [userns]}
servers:
  a:
    command: [sh, -c, "sleep 1"]
    filesystem: {mounts: [{source: ./not-made-yet, target: /data/docs, mode: ro}]}
    tools: {allow: ["*"]}
  b:
    command: [sh, -c, "sleep 1"]
    filesystem: {input: {source: ./no-input}}
    tools: {allow: ["*"]}
  c:
    command: [sh, -c, "sleep 1"]
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	w := wiring{c: c, opts: specconv.Options{Base: base, StateDir: t.TempDir()}}
	w.setups = newSetupRig().st
	gss, err := w.servers()
	if err != nil || len(gss) != 3 {
		t.Fatalf("servers: %d, %v; want all three, a and b unavailable", len(gss), err)
	}
	down := w.setups.Down()
	for _, name := range []string{"a", "b"} {
		if !strings.Contains(down[name], "no such file or directory") {
			t.Errorf("server %s: down %q, want why", name, down[name])
		}
	}
	if _, ok := down["c"]; ok {
		t.Errorf("server c is down: %q", down["c"])
	}
	if _, err := gss[0].Launch(context.Background(), gateway.Scope{Agent: "x"}); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("a start of a: %v, want it unavailable", err)
	}
}

// TestInstallingServer: a server whose package installs in the
// background is unavailable as installing (not a fault) until its
// install ends; then it is set up, or unavailable for why the install
// failed, retried like any unavailable server; serve's stop cancelling
// the install is recorded as nothing.
func TestInstallingServer(t *testing.T) {
	launch := func(context.Context, gateway.Scope) (*gateway.Process, error) { return nil, nil }
	for _, tc := range []struct {
		name    string
		err     error
		phases  string
		launch  string // the start's error, "" for none
		downNow string
		logged  string // serve's log line of the outcome
	}{
		{name: "installed", phases: "install: install:recovered", logged: "server's package installed: it joins the sessions"},
		{name: "failed", err: errors.New("server x: npm package @x/y: not found"), phases: "install: install:",
			launch: "unavailable: serve could not set it up (a new session retries it): npm package @x/y: not found", downNow: "npm package @x/y: not found",
			logged: "server unavailable: its package did not install"},
		// Its input missing before the install, or its setup after it.
		{name: "setup", err: &SetupError{Server: "x", Err: errors.New("server x: filesystem.input: open /p/in: no such file or directory")}, phases: "install: install:",
			launch:  "unavailable: serve could not set it up (a new session retries it): filesystem.input: open /p/in: no such file or directory",
			downNow: "filesystem.input: open /p/in: no such file or directory", logged: "server unavailable: it cannot be set up"},
		{name: "stopped", err: context.Canceled, phases: "install:",
			launch: "unavailable: serve could not set it up (a new session retries it): context canceled", downNow: errInstalling.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSetupRig()
			var logs bytes.Buffer
			r.st.log = slog.New(slog.NewTextHandler(&logs, nil))
			gs := &gateway.Server{Name: "x"}
			done := make(chan struct{})
			var retried atomic.Int32
			r.st.installing(gs, done, func() (*gateway.Server, error) {
				if tc.err != nil {
					return nil, tc.err
				}
				return &gateway.Server{Name: "x", Launch: launch}, nil
			}, func(context.Context) (*gateway.Server, error) {
				retried.Add(1)
				return &gateway.Server{Name: "x", Launch: launch}, nil
			})
			if !r.st.Installing("x") || r.st.Down()["x"] != errInstalling.Error() || gs.Ready == nil {
				t.Fatalf("while installing: Installing %v, Down %v, Ready set %v", r.st.Installing("x"), r.st.Down(), gs.Ready != nil)
			}
			select {
			case <-gs.Ready():
				t.Fatal("Ready before the install ended")
			default:
			}
			close(done)
			select {
			case <-gs.Ready():
			case <-time.After(10 * time.Second):
				t.Fatal("Ready not closed 10 s after the install ended")
			}
			r.st.stop()
			_, err := gs.Launch(context.Background(), gateway.Scope{})
			if got := fmt.Sprint(err); (tc.launch == "" && err != nil) || (tc.launch != "" && got != tc.launch) {
				t.Fatalf("start after the install: %v, want %q", err, tc.launch)
			}
			if r.st.Installing("x") != (tc.name == "stopped") || r.st.Down()["x"] != tc.downNow {
				t.Errorf("after the install: Installing %v, Down %v", r.st.Installing("x"), r.st.Down())
			}
			var phases []string
			for _, rec := range r.records {
				phases = append(phases, rec.Detail["phase"]+":"+rec.Decision)
			}
			if got := strings.Join(phases, " "); got != tc.phases {
				t.Errorf("audit records' phase:decision = %q, want %q", got, tc.phases)
			}
			if !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("serve's log lacks %q:\n%s", tc.logged, logs.String())
			}
			if tc.name == "failed" {
				r.advance(retryEvery)
				if _, err := gs.Launch(context.Background(), gateway.Scope{}); err != nil || retried.Load() != 1 {
					t.Errorf("a start retryEvery after the failed install: %v, %d retries", err, retried.Load())
				}
			}
		})
	}
}

// TestInstallsWaitedWhenNoOtherRuns: when every server without a
// package fails its setup (an input dir not made yet), the wiring waits
// for the background installs, as awaitInstalls does when there is no
// other server, so that serve fails at its start, naming each reason,
// when none installs, rather than run with nothing to serve.
func TestInstallsWaitedWhenNoOtherRuns(t *testing.T) {
	w, in, r := noOtherRuns(t)
	w.serveBy = time.Now().Add(aloneWait) // as serve sets it
	ended := time.AfterFunc(200*time.Millisecond, func() {
		in.err = errors.New("server pkg: npm package @x/y: registry unreachable")
		close(in.done)
	})
	defer ended.Stop()
	gss, err := w.servers()
	r.st.stop()
	if err == nil || !strings.Contains(err.Error(), "registry unreachable") || !strings.Contains(err.Error(), "no-input") {
		t.Fatalf("servers: %d servers, error %v; want an error naming both reasons", len(gss), err)
	}
}

// TestServesWhenInstallOutlastsServeBy: that wait ends at serveBy (a
// stdio client gives initialize a minute, and then ends serve and the
// install with it): the wiring goes on with the package server pending,
// installing, and it joins the sessions once installed.
func TestServesWhenInstallOutlastsServeBy(t *testing.T) {
	w, in, r := noOtherRuns(t)
	defer r.st.stop()
	defer close(in.done) // before the stop, which waits for the install
	w.serveBy = time.Now().Add(300 * time.Millisecond)
	var gss []*gateway.Server
	wired := make(chan error, 1)
	go func() {
		var err error
		gss, err = w.servers()
		wired <- err
	}()
	select {
	case err := <-wired:
		if err != nil || len(gss) != 2 {
			t.Fatalf("servers: %d servers, error %v; want both, one installing", len(gss), err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wiring still waits for the install 10 s after serveBy")
	}
	if !r.st.Installing("pkg") || gss[0].Ready == nil {
		t.Fatalf("the package server is not pending as installing: Down %v", r.st.Down())
	}
}

// TestInstalledSetUpBeforeServing: a package that installs while the
// wiring waits is set up before the wiring returns, so that serve's
// start-up summary, written just after, does not call it installing
// (CI saw "memory (installing)" for a package installed a moment
// before).
func TestInstalledSetUpBeforeServing(t *testing.T) {
	w, in, r := noOtherRuns(t)
	defer r.st.stop()
	w.serveBy = time.Now().Add(aloneWait)
	ended := time.AfterFunc(200*time.Millisecond, func() { close(in.done) })
	defer ended.Stop()
	gss, err := w.servers()
	if err != nil || len(gss) != 2 {
		t.Fatalf("servers: %d servers, error %v; want both", len(gss), err)
	}
	if r.st.Installing("pkg") {
		t.Fatalf("the wiring returned with the installed package's server still installing: Down %v", r.st.Down())
	}
}

// TestServesOnceChecked: when no server can run without a package, serve
// waits for a package only until the registry has confirmed it
// (Installer.Checked: a mistyped name or version fails by then), not
// for its whole install, nor until serveBy: a client such as Codex
// gives a server's start 10 s. Both of serve's waits: awaitInstalls at
// its start, and the wiring's when the servers without a package could
// not be set up.
func TestServesOnceChecked(t *testing.T) {
	w, in, r := noOtherRuns(t)
	defer r.st.stop()
	defer close(in.done) // before the stop, which waits for the install
	in.checked = make(chan struct{})
	w.serveBy = time.Now().Add(aloneWait)
	checked := time.AfterFunc(200*time.Millisecond, in.check)
	defer checked.Stop()
	begin := time.Now()
	gss, err := w.servers()
	if took := time.Since(begin); err != nil || len(gss) != 2 || took > aloneWait/2 {
		t.Fatalf("wiring: %d servers, error %v, after %v; want both, well before serveBy", len(gss), err, took)
	}

	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  pkg: {package: \"npm:@x/y\", tools: {allow: [\"*\"]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{c: c, o: Options{Stderr: io.Discard}}
	in = &install{ps: in.ps, done: make(chan struct{}), checked: make(chan struct{})}
	defer close(in.done)
	checked = time.AfterFunc(200*time.Millisecond, in.check)
	defer checked.Stop()
	begin = time.Now()
	d.awaitInstalls([]*install{in})
	if took := time.Since(begin); took >= installWait {
		t.Fatalf("serve's start waited %v for a checked package; want less than installWait (%v): the session waits for it", took, installWait)
	}
}

// TestFailedAfterCheckCounts: an install that the registry confirmed and
// that then failed (its dependencies did not install) before the wiring
// waits is a failure, not a package still installing: with no other
// server able to run, serve fails at its start, saying why. Its checked
// event used to race its end, and serve then served nothing, in about
// half the starts.
func TestFailedAfterCheckCounts(t *testing.T) {
	for i := range 20 {
		w, in, r := noOtherRuns(t)
		in.checked = make(chan struct{})
		in.check()
		in.err = errors.New("server pkg: npm install failed: ETARGET")
		close(in.done)
		w.serveBy = time.Now().Add(aloneWait)
		gss, err := w.servers()
		r.st.stop()
		if err == nil || !strings.Contains(err.Error(), "ETARGET") {
			t.Fatalf("start %d: %d servers, error %v; want an error naming the failed install", i, len(gss), err)
		}
	}
}

// noOtherRuns wires a package server whose package still installs (in)
// beside a server whose setup fails (its input dir missing).
func noOtherRuns(t *testing.T) (wiring, *install, *setupRig) {
	t.Helper()
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  pkg:
    package: "npm:@x/y"
    tools: {allow: ["*"]}
  b:
    command: [sh, -c, "sleep 1"]
    filesystem: {input: {source: ./no-input}}
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	pss, err := PackageServers(c)
	if err != nil || len(pss) != 1 {
		t.Fatalf("package servers: %v %v", pss, err)
	}
	in := &install{ps: pss[0], done: make(chan struct{})}
	w := wiring{c: c, opts: specconv.Options{Base: t.TempDir(), StateDir: t.TempDir()},
		installing: map[string]*install{"pkg": in}, ctx: context.Background(),
		install: func(context.Context, *config.Server) (specconv.Package, error) {
			return specconv.Package{}, errors.New("still failing")
		}}
	r := newSetupRig()
	w.setups = r.st
	return w, in, r
}

// TestRetryInBackground: in serve (setups.ctx set), a retry that is due
// runs in the background through Server.Ready, outside any start's
// timeout: the sessions need not wait for it, mcpbox ps says it is being
// set up again, and once it succeeds the server launches. Before
// retryEvery has passed, Ready has nothing to wait for and the start
// fails at once saying why.
func TestRetryInBackground(t *testing.T) {
	r := newServeRig()
	defer r.st.stop()
	gs := &gateway.Server{Name: "x"}
	release := make(chan struct{})
	var setups atomic.Int32
	r.st.unavailable(gs, &SetupError{Server: "x", Err: errors.New("server x: integrity mismatch")}, func(ctx context.Context) (*gateway.Server, error) {
		setups.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &gateway.Server{Name: "x", Launch: func(context.Context, gateway.Scope) (*gateway.Process, error) { return nil, nil }}, nil
	})
	select {
	case <-gs.Ready():
	default:
		t.Fatal("Ready has a setup to wait for before retryEvery")
	}
	if _, err := gs.Launch(context.Background(), gateway.Scope{}); err == nil || !strings.Contains(err.Error(), "integrity mismatch") {
		t.Fatalf("a start before retryEvery: %v", err)
	}
	r.advance(retryEvery)
	ready := gs.Ready()
	select {
	case <-ready:
		t.Fatal("Ready closed while the retry runs")
	case <-time.After(100 * time.Millisecond):
	}
	if gs.Ready() != ready {
		t.Error("a second Ready began another retry")
	}
	if why := r.st.Down()["x"]; why != "setting it up again (last: integrity mismatch)" {
		t.Errorf("Down while retrying: %q", why)
	}
	close(release)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("Ready not closed 10 s after the retry's setup ended")
	}
	if _, err := gs.Launch(context.Background(), gateway.Scope{}); err != nil || setups.Load() != 1 || len(r.st.Down()) != 0 {
		t.Fatalf("a start after the retry: %v, %d setups, Down %v", err, setups.Load(), r.st.Down())
	}
}

// TestFailedRetryNotRepeatedInline: a background retry (readyChan)
// that fails after more than retryEvery is not followed by a second
// setup run inline by the start that waited for it (upstream.get waits
// for Ready, then calls Launch): in serve only Ready retries, and the
// next retry is due retryEvery after this one ended, not began.
func TestFailedRetryNotRepeatedInline(t *testing.T) {
	r := newServeRig()
	defer r.st.stop()
	gs := &gateway.Server{Name: "x"}
	var setups atomic.Int32
	var inlineCtxHadDeadline atomic.Bool
	r.st.unavailable(gs, &SetupError{Server: "x", Err: errors.New("server x: registry unreachable")}, func(ctx context.Context) (*gateway.Server, error) {
		if setups.Add(1) > 1 {
			_, ok := ctx.Deadline()
			inlineCtxHadDeadline.Store(ok)
			// An install of minutes: bounded only by the start's timeout.
			<-ctx.Done()
			return nil, ctx.Err()
		}
		r.advance(30 * time.Second) // a slow install that fails
		return nil, errors.New("server x: registry still unreachable")
	})
	r.advance(retryEvery)
	// What upstream.get does: wait for Ready (outside the start timeout),
	// then Launch under the start's timeout.
	<-gs.Ready()
	startCtx, cancelStart := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelStart()
	begin := time.Now()
	_, err := gs.Launch(startCtx, gateway.Scope{})
	took := time.Since(begin)
	t.Logf("Launch after the background retry: %v after %v; setups run: %d; inline setup under the start's deadline: %v",
		err, took, setups.Load(), inlineCtxHadDeadline.Load())
	if n := setups.Load(); n != 1 {
		t.Errorf("the failed background retry was followed by %d more setup(s) run inline by Launch (within the start's timeout, took %v)", n-1, took)
	}
}

// TestLaunchDoesNotWaitForRetry: a start whose Ready was closed (no
// retry due) but which launches later (upstream.get's crash backoff
// sits between Ready and Launch), while another caller's Ready has begun
// a background retry, fails at once: it does not wait for the retry
// under its start's timeout (and count toward the hangMax give-up).
func TestLaunchDoesNotWaitForRetry(t *testing.T) {
	r := newServeRig()
	defer r.st.stop()
	gs := &gateway.Server{Name: "x"}
	release := make(chan struct{})
	defer close(release)
	r.st.unavailable(gs, &SetupError{Server: "x", Err: errors.New("server x: registry unreachable")}, func(ctx context.Context) (*gateway.Server, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, errors.New("server x: still unreachable")
	})
	r.advance(retryEvery - time.Second)
	select {
	case <-gs.Ready(): // start 1: not due, closed
	default:
		t.Fatal("Ready not closed before retryEvery")
	}
	r.advance(2 * time.Second) // start 1 waits out its backoff delay
	_ = gs.Ready()             // session 2 (or settingUp in a session's loop) begins the retry
	startCtx, cancelStart := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelStart()
	begin := time.Now()
	_, err := gs.Launch(startCtx, gateway.Scope{}) // start 1 launches
	if took := time.Since(begin); took >= 400*time.Millisecond {
		t.Errorf("Launch waited %v (its whole start timeout) for the background retry: %v", took, err)
	}
}

// TestNoRetryAfterStop: no background setup runs after setups.stop
// returned (serve closes the guard and the instance record then), also
// when stop comes while readyChan begins a retry (here: while again
// reports to the instance record, which in serve writes a file).
func TestNoRetryAfterStop(t *testing.T) {
	r := newServeRig()
	var stopped, ranAfterStop atomic.Bool
	changed := r.st.changed
	r.st.changed = func(d map[string]string) {
		changed(d)
		for _, why := range d {
			if strings.HasPrefix(why, "setting it up again") {
				go func() { // serve's stopInstalls, on its own goroutine
					r.st.stop()
					stopped.Store(true)
				}()
				time.Sleep(100 * time.Millisecond) // inst.Update writing the record
			}
		}
	}
	gs := &gateway.Server{Name: "x"}
	ran := make(chan struct{})
	r.st.unavailable(gs, &SetupError{Server: "x", Err: errors.New("server x: boom")}, func(ctx context.Context) (*gateway.Server, error) {
		ranAfterStop.Store(stopped.Load())
		close(ran)
		return nil, ctx.Err()
	})
	r.advance(retryEvery)
	_ = gs.Ready()
	select {
	case <-ran:
		if ranAfterStop.Load() {
			t.Error("a background retry's setup ran after setups.stop returned")
		}
	case <-time.After(2 * time.Second):
	}
}

// TestReadyRacesStop: the same without a hook, for the race detector
// (a WaitGroup's Add from zero concurrent with its Wait).
func TestReadyRacesStop(t *testing.T) {
	for i := 0; i < 2000; i++ {
		r := newServeRig()
		gs := &gateway.Server{Name: "x"}
		r.st.unavailable(gs, &SetupError{Server: "x", Err: errors.New("server x: boom")}, func(ctx context.Context) (*gateway.Server, error) {
			return nil, ctx.Err()
		})
		r.advance(retryEvery)
		go gs.Ready()
		r.st.stop()
	}
}

// TestUnsetEnvSecretUnavailable: a server whose env: secret is unset
// here is unavailable from serve's start, for good (serve's environment
// does not change: no retry, no install of its package); a start of it
// says to restart serve. A group member is left to fail as a group.
func TestUnsetEnvSecretUnavailable(t *testing.T) {
	const unset = "MCPBOX_TEST_SURELY_UNSET_4F1B"
	if _, ok := os.LookupEnv(unset); ok {
		t.Skip(unset + " is set")
	}
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  gh:
    package: npm:@x/not-installed@1.0.0
    secrets: {TOKEN: {from: env:`+unset+`}}
    tools: {allow: ["*"]}
  good:
    command: [sh, -c, "sleep 1"]
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	po := packageOptions{c: c, stateDir: t.TempDir(), base: t.TempDir()}
	if ins, err := po.startInstalls(context.Background()); err != nil || len(ins) != 0 {
		t.Fatalf("startInstalls: %d installs, %v; want none for gh", len(ins), err)
	}
	installs := 0
	w := wiring{c: c, opts: specconv.Options{Base: t.TempDir(), StateDir: t.TempDir()},
		install: func(context.Context, *config.Server) (specconv.Package, error) {
			installs++
			return specconv.Package{}, errors.New("installed")
		}}
	r := newSetupRig()
	w.setups = r.st
	servers, err := w.servers()
	if err != nil || len(servers) != 2 {
		t.Fatalf("servers: %d, %v", len(servers), err)
	}
	if down := r.st.Down(); len(down) != 1 || !strings.Contains(down["gh"], "env:"+unset) || !strings.Contains(down["gh"], "until serve is started again") {
		t.Fatalf("Down: %v, want gh for its secret", down)
	}
	r.advance(2 * retryEvery)
	_, err = servers[0].Launch(context.Background(), gateway.Scope{})
	if err == nil || !strings.Contains(err.Error(), "restart mcpbox serve") || installs != 0 {
		t.Errorf("gh's start: %v after %d installs; want no retry", err, installs)
	}

	// mcpbox pin leaves gh out for the same reason, says so, and lists
	// the others.
	dir := t.TempDir()
	l, err := NewLister(ListOptions{Config: c, ConfigPath: filepath.Join(dir, "mcpbox.yaml"), Base: dir, StateDir: t.TempDir(), NoRecord: true})
	if err != nil {
		t.Fatalf("NewLister: %v; want gh left out and good listed", err)
	}
	defer l.Close()
	if _, err := l.Definitions(context.Background(), "gh"); err == nil || !strings.Contains(err.Error(), unset) || strings.Contains(err.Error(), "not installed") {
		t.Errorf("gh's Definitions: %v; want the unset variable named", err)
	}
}
