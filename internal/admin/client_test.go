package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/instance"
)

// ownerBackend is a gateway owning the sandbox sbx and the approval apr.
type ownerBackend struct {
	Backend
	sbx, apr string

	mu      sync.Mutex
	stopped []string // guarded by mu
}

func (b *ownerBackend) Sandboxes() []Sandbox {
	return []Sandbox{{ID: b.sbx, State: "running", Server: "fs"}}
}

func (b *ownerBackend) Approvals() ([]approval.Request, []approval.Remembered) {
	return []approval.Request{{ID: b.apr}}, []approval.Remembered{{ID: "apr_always"}}
}

func (b *ownerBackend) Control(op, id, _ string) error {
	if id != b.sbx {
		return fmt.Errorf("no sandbox %q (see mcpbox ps)", id)
	}
	b.mu.Lock()
	b.stopped = append(b.stopped, op+" "+id)
	b.mu.Unlock()
	return nil
}

func (b *ownerBackend) Decide(id string, _ approval.Decision) error {
	if id != b.apr {
		return errors.New("no such approval")
	}
	return nil
}

func (b *ownerBackend) calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.stopped...)
}

// fakeGateway serves an admin socket and record on state as the instance
// pid, owning the sandbox sbx and the approval apr.
func fakeGateway(t *testing.T, state string, pid int, sbx, apr string) *ownerBackend {
	t.Helper()
	if err := instance.MakeDir(state); err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(context.Background(), instance.SocketPath(state, pid), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	b := &ownerBackend{sbx: sbx, apr: apr}
	srv.Attach(b)
	if err := instance.Write(instance.Record{PID: pid, Started: time.Now(), StateDir: state, Project: "/p" + sbx, Transport: "stdio"}); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClientFindsTheOwner: with two instances on one state dir, a request
// about a sandbox or approval reaches the instance that has it, listings
// gather both, and Views shows both with their sandboxes.
func TestClientFindsTheOwner(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	owners := map[string]*ownerBackend{
		"sbx_a": fakeGateway(t, state, 101, "sbx_a", "apr_a"),
		"sbx_b": fakeGateway(t, state, 102, "sbx_b", "apr_b"),
	}
	c := Client{StateDir: state}
	for id := range owners {
		if err := c.Control("stop", id); err != nil {
			t.Errorf("stop %s: %v", id, err)
		}
		for other, ob := range owners {
			want := 0
			if other == id {
				want = 1
			}
			if n := strings.Count(strings.Join(ob.calls(), ","), "stop "+id); n != want {
				t.Errorf("stop %s reached %s %d times, want %d", id, other, n, want)
			}
		}
	}
	if err := c.Control("stop", "sbx_none"); err == nil || !strings.Contains(err.Error(), `no sandbox "sbx_none"`) {
		t.Errorf("stop of an unknown sandbox: %v", err)
	}
	if req, err := c.Decide("apr_b", true, ""); err != nil || req.ID != "apr_b" {
		t.Errorf("decide apr_b: %+v, %v", req, err)
	}
	a, err := c.Approvals()
	if err != nil || len(a.Pending) != 2 || len(a.Remembered) != 1 {
		t.Errorf("approvals: %+v, %v; want both pending requests and one remembered", a, err)
	}
	views, err := c.Views()
	if err != nil || len(views) != 2 {
		t.Fatalf("views: %+v, %v", views, err)
	}
	got := map[string]int{}
	for _, v := range views {
		for _, s := range v.Sandboxes {
			got[s.ID] = s.Instance
			if s.Project != "/p"+s.ID {
				t.Errorf("sandbox %s: project %q", s.ID, s.Project)
			}
		}
	}
	if got["sbx_a"] != 101 || got["sbx_b"] != 102 {
		t.Errorf("views' owners: %v", got)
	}

	// AllStateDirs: through the registry, from anywhere.
	root, _ := instance.Root()
	other := filepath.Join(tmp, "o")
	ob := fakeGateway(t, other, 103, "sbx_c", "apr_c")
	for _, d := range []string{state, other} {
		if err := instance.Register(root, d); err != nil {
			t.Fatal(err)
		}
	}
	all := Client{StateDir: AllStateDirs}
	if views, err := all.Views(); err != nil || len(views) != 3 {
		t.Errorf("views of all: %d, %v; want 3", len(views), err)
	}
	if err := all.Control("stop", "sbx_c"); err != nil || len(ob.calls()) != 1 {
		t.Errorf("stop --all of another state dir's sandbox: %v (calls %v)", err, ob.calls())
	}
}

// TestClientNoInstance: a state dir with no live instance is named, and
// so are the projects of this user's serves that run elsewhere.
func TestClientNoInstance(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	if _, err := (Client{StateDir: state}).Approvals(); err == nil || !strings.HasSuffix(err.Error(), "no mcpbox serve is running on the state dir "+state) {
		t.Errorf("approvals with nothing running: %v", err)
	}
	root, _ := instance.Root()
	for i, project := range []string{"/p/one", "/p/two"} {
		dir := filepath.Join(tmp, fmt.Sprint(i))
		liveFake(t, dir, project)
		if err := instance.Register(root, dir); err != nil {
			t.Fatal(err)
		}
		want := " (one runs for /p/one: --all reaches it)"
		if i == 1 {
			want = " (serves run for 2 other projects, /p/one, /p/two: --all reaches them)"
		}
		_, err := (Client{StateDir: state}).Approvals()
		if !errors.Is(err, ErrNoInstance) || !strings.HasSuffix(err.Error(), "on the state dir "+state+want) {
			t.Errorf("approvals with %d serves elsewhere: %v; want it to end %q", i+1, err, want)
		}
	}
	// A serve reaching its siblings (its dashboard) looks nowhere else.
	if _, err := (Client{StateDir: state, Self: os.Getpid()}).Approvals(); err == nil || strings.Contains(err.Error(), "--all") {
		t.Errorf("a serve's own client: %v; want no hint of other projects", err)
	}
	if err := (Client{StateDir: state}).Control("kill", "sbx_a"); err == nil {
		t.Error("an unknown sandbox operation was sent")
	}
}

// TestClientStateDirs: a client of several state dirs (Listing, where
// instances of several configs run) asks the instances of each, lists
// one state dir reached under two spellings once, and names every dir
// when none runs.
func TestClientStateDirs(t *testing.T) {
	tmp := shortTemp(t)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	fakeGateway(t, a, 101, "sbx_a", "apr_a")
	ob := fakeGateway(t, b, 102, "sbx_b", "apr_b")
	link := filepath.Join(tmp, "l")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	c := Client{StateDirs: []string{a, link, b}}
	if views, err := c.Views(); err != nil || len(views) != 2 {
		t.Errorf("views of a, a link to a, and b: %d, %v; want 2", len(views), err)
	}
	if err := c.Control("stop", "sbx_b"); err != nil || len(ob.calls()) != 1 {
		t.Errorf("stop of the second dir's sandbox: %v (calls %v)", err, ob.calls())
	}
	none := []string{filepath.Join(tmp, "x"), filepath.Join(tmp, "y")}
	if _, err := (Client{StateDirs: none}).Views(); err == nil || !strings.Contains(err.Error(), none[0]+" or "+none[1]) {
		t.Errorf("views with nothing running: %v; want both dirs named", err)
	}
}

// TestAddrInUseNamesTheInstance: a listen that fails because the port is
// taken says which instance (its project) holds it and how to get a free
// port; other errors pass unchanged.
func TestAddrInUseNamesTheInstance(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, lerr := net.Listen("tcp", addr)
	if lerr == nil {
		t.Fatal("a second listen on a taken port succeeded")
	}
	err = ExplainAddrInUse(addr, lerr)
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), "--http 127.0.0.1:0") {
		t.Errorf("error: %v; want this process's pid and --http 127.0.0.1:0", err)
	}
	// As an mcpbox instance (a record of this pid): its project.
	state := filepath.Join(tmp, "s")
	rec := liveFake(t, state, "/some/project")
	root, _ := instance.Root()
	if err := instance.Register(root, state); err != nil {
		t.Fatal(err)
	}
	err = ExplainAddrInUse(addr, lerr)
	if want := fmt.Sprintf("mcpbox serve pid %d of project /some/project", rec.PID); !strings.Contains(err.Error(), want) {
		t.Errorf("error: %v; want %q", err, want)
	}
	other := errors.New("permission denied")
	if got := ExplainAddrInUse(addr, other); got != other {
		t.Errorf("another error became %v", got)
	}
}

// TestListingBoundedByStuckInstance: an instance that takes connections
// but never answers (stopped by SIGSTOP: the kernel still accepts for
// it) costs a listing listingWait, once, not minutes per instance; the
// others are listed, and the stuck one is named as such.
func TestListingBoundedByStuckInstance(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	fakeGateway(t, state, 101, "sbx_a", "apr_a")
	for _, pid := range []int{102, 103} {
		ln, err := net.Listen("unix", instance.SocketPath(state, pid))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() }) // held, never answered
			}
		}()
		if err := instance.Write(instance.Record{PID: pid, Started: time.Now(), StateDir: state, Project: "/stuck", Transport: "stdio"}); err != nil {
			t.Fatal(err)
		}
	}
	old := listingWait
	listingWait = time.Second
	defer func() { listingWait = old }()

	begin := time.Now()
	views, err := Client{StateDir: state}.Views()
	took := time.Since(begin)
	if err != nil || len(views) != 3 {
		t.Fatalf("views: %+v, %v", views, err)
	}
	if took > listingWait*8/5 { // one after the other would take two
		t.Errorf("listing took %v behind two stuck instances; want about %v", took, listingWait)
	}
	for _, v := range views {
		switch v.Record.PID {
		case 101:
			if v.Err != nil || len(v.Sandboxes) != 1 {
				t.Errorf("the live instance: %+v", v)
			}
		default:
			if v.Err == nil || !strings.Contains(v.Err.Error(), "no answer in") {
				t.Errorf("stuck instance %d: %v, want it named as not answering", v.Record.PID, v.Err)
			}
		}
	}
	if a, err := (Client{StateDir: state}).Approvals(); err != nil || len(a.Pending) != 1 {
		t.Errorf("approvals behind stuck instances: %+v, %v; want the live one's", a, err)
	}
}
