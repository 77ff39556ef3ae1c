package admin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
)

// shortTemp is a temp dir with a short path: unix socket paths are
// limited to 108 bytes.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpbox-admin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// liveFake starts a real instance (admin socket and record) on state.
func liveFake(t *testing.T, state, project string) instance.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rec := NewRecord(state, "", project, true, "")
	inst, err := Start(ctx, rec, InstanceOptions{Config: &config.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close(); cancel() })
	return rec
}

// TestAdminSocket: the gateway's own user reaches the admin socket; a
// process of the same user in another user namespace (as a sandbox runs)
// is refused, and the socket is not open to others.
func TestAdminSocket(t *testing.T) {
	dir := shortTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("XDG_STATE_HOME", dir)
	rec := NewRecord(dir, "", dir, true, "")
	inst, err := Start(ctx, rec, InstanceOptions{Config: &config.Config{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	sock := rec.Socket()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	// Its own user gets an answer (here: that no server has the secret).
	if _, err := (Client{StateDir: dir}).Rotate("NONE"); err == nil || !strings.Contains(err.Error(), "no server has a secret") {
		t.Fatalf("own user: %v", err)
	}
	if _, err := Serve(ctx, sock, Options{Config: &config.Config{}}); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "another mcpbox serve") {
		t.Fatalf("a second listener on the instance's socket: %v", err)
	}

	unshare, err1 := exec.LookPath("unshare")
	python, err2 := exec.LookPath("python3")
	if err1 != nil || err2 != nil {
		t.Skip("unshare or python3 missing: cannot test a peer in another user namespace")
	}
	script := `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"op":"rotate","secret":"NONE"}\n'); print(s.recv(4096).decode())`
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	out, err := exec.CommandContext(cctx, unshare, "--user", "--map-current-user", python, "-c", script, sock).CombinedOutput()
	if err != nil {
		t.Skipf("cannot run a process in a new user namespace here: %v %s", err, out)
	}
	if !strings.Contains(string(out), "permission denied") || strings.Contains(string(out), "no server") {
		t.Fatalf("a peer in another user namespace got %q, want permission denied", out)
	}
}

// blockingBackend is a back-end whose Approvals waits for release, over
// a "store" that must not be used once closed.
type blockingBackend struct {
	Backend
	entered chan struct{}
	release chan struct{}
	closed  chan struct{} // closed: the store is gone
	misuse  chan string
}

func (b *blockingBackend) Approvals() ([]approval.Request, []approval.Remembered) {
	close(b.entered)
	<-b.release
	select {
	case <-b.closed:
		b.misuse <- "Approvals used the store after it closed"
	default:
	}
	return []approval.Request{{ID: "apr_1"}}, nil
}

// TestDetachWaitsForHandlers: a handler in flight while serve shuts down
// ends before Detach returns, so that the back-end (the guard and its
// audit store) may close after it; requests after it are refused without
// touching the back-end, and the socket still answers until Close.
func TestDetachWaitsForHandlers(t *testing.T) {
	state := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(state, "xdg"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inst, err := Start(ctx, NewRecord(state, "", state, true, ""), InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	b := &blockingBackend{entered: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{}), misuse: make(chan string, 1)}
	inst.Attach(b)
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(b.release) }) }
	defer unblock() // before inst.Close, which waits for the handler

	answered := make(chan error, 1)
	go func() {
		a, err := Client{StateDir: state}.Approvals()
		if err == nil && len(a.Pending) != 1 {
			err = errors.New("no pending request in the answer")
		}
		answered <- err
	}()
	<-b.entered
	detached := make(chan struct{})
	go func() {
		inst.Detach()
		close(b.closed) // as serve closes the guard once the admin handlers ended
		close(detached)
	}()
	select {
	case <-detached:
		t.Fatal("Detach returned while a handler was using the back-end")
	case <-time.After(200 * time.Millisecond):
	}
	unblock()
	<-detached
	if err := <-answered; err != nil {
		t.Errorf("the request in flight: %v", err)
	}
	select {
	case m := <-b.misuse:
		t.Error(m)
	default:
	}
	if _, err := (Client{StateDir: state}).Approvals(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("a request after Detach: %v, want shutting down", err)
	}
	if recs, _ := instance.List(state); len(recs) != 1 {
		t.Errorf("after Detach: %d live records, want 1 (the instance is live until Close)", len(recs))
	}
}

// TestStartingAndUnknownOps: before Attach every op but rotate is told
// to try again; an unknown op is named.
func TestStartingAndUnknownOps(t *testing.T) {
	state := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(state, "xdg"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := &config.Config{Servers: []*config.Server{{Name: "gh", Secrets: []config.Secret{{Name: "TOKEN"}}}}}
	inst, err := Start(ctx, NewRecord(state, "", state, true, ""), InstanceOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	c := Client{StateDir: state}
	if _, err := c.Approvals(); err == nil || !strings.Contains(err.Error(), "still starting") {
		t.Errorf("approvals before attach: %v", err)
	}
	if _, err := c.Rotate("gh/TOKEN"); err == nil || !strings.Contains(err.Error(), "still starting") {
		t.Errorf("rotate of a declared secret before attach: %v", err)
	}
	inst.Attach(countingBackend{})
	r, err := c.Rotate("TOKEN")
	if err != nil || len(r.Servers) != 1 || r.Servers[0] != "gh" || r.Instances != 2 {
		t.Errorf("rotate: %+v, %v; want gh with 2 instances", r, err)
	}
	if _, err := (Client{StateDir: state}).one(request{Op: "nope"}); err == nil || !strings.Contains(err.Error(), `unknown op "nope"`) {
		t.Errorf("unknown op: %v", err)
	}
}

// countingBackend renews two instances of every server.
type countingBackend struct{ Backend }

func (countingBackend) Refresh(string) int { return 2 }

// TestWebStopWaitsForRequests: stopping the approvals endpoint, even
// after serve's context ended, waits for a request in flight (a decision
// being written) before the broker's store may close.
func TestWebStopWaitsForRequests(t *testing.T) {
	dir := shortTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	path := filepath.Join(dir, webSocket)
	stop, err := serveWeb(ctx, path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		w.Write([]byte("decided"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("approvals socket: %v, %v; want mode 0600", fi, err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	got := make(chan string, 1)
	go func() {
		resp, err := client.Post("http://approvals/approvals/apr_1", "application/json", nil)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	cancel() // serve's context ends first, as on a signal
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a request was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	unblock()
	<-stopped
	if s := <-got; s != "decided" {
		t.Errorf("the request in flight got %q, want its answer", s)
	}
	if _, err := os.Lstat(path); err == nil {
		t.Error("the approvals socket is still there after stop")
	}
}

// TestProjectConfig: the project config of a directory is the first of
// mcpbox.yaml and mcpbox.yml that is a regular file; none is "".
func TestProjectConfig(t *testing.T) {
	dir := t.TempDir()
	if got := ProjectConfig(dir); got != "" {
		t.Fatalf("ProjectConfig(empty dir) = %q, want \"\"", got)
	}
	if err := os.Mkdir(filepath.Join(dir, "mcpbox.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := ProjectConfig(dir); got != "" {
		t.Fatalf("ProjectConfig(dir with a directory mcpbox.yaml) = %q, want \"\"", got)
	}
	yml := filepath.Join(dir, "mcpbox.yml")
	if err := os.WriteFile(yml, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ProjectConfig(dir); got != yml {
		t.Fatalf("ProjectConfig = %q, want %q", got, yml)
	}
}

// TestStartWhileAnotherStops: an instance that starts while another of
// its state dir is stopping (its context ended, its Close not yet run:
// an editor restarting the server) sees it live, not crashed: it does not
// take its record for a crash's, nor think itself alone and remove the
// session workspaces the other still uses. A record whose instance is
// gone is a crash's.
func TestStartWhileAnotherStops(t *testing.T) {
	state := shortTemp(t)
	rec := NewRecord(state, "", state, true, "")
	rec.PID = 424242 // not this process: a second instance of the dir
	ctx, cancel := context.WithCancel(context.Background())
	stopping, err := Start(ctx, rec, InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // stopping: its sandboxes and guard close before Close
	second, err := Start(context.Background(), NewRecord(state, "", state, true, ""), InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Shared() || len(second.Crashed()) != 0 {
		t.Errorf("started while another stopped: shared %v, crashed %v; want shared, none crashed", second.Shared(), second.Crashed())
	}
	second.Close()
	// The first ends without Close (killed): its socket gone, its record
	// left. The next start names it.
	stopping.srv.Close()
	third, err := Start(context.Background(), NewRecord(state, "", state, true, ""), InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if third.Shared() || len(third.Crashed()) != 1 || third.Crashed()[0] != 424242 {
		t.Errorf("after a crash: shared %v, crashed %v; want alone and 424242", third.Shared(), third.Crashed())
	}
}
