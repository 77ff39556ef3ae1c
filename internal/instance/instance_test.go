package instance

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRootHonoursXDGStateHome(t *testing.T) {
	x := t.TempDir()
	t.Setenv("XDG_STATE_HOME", x)
	if got, _ := Root(); got != filepath.Join(x, "mcpbox") {
		t.Errorf("Root with XDG_STATE_HOME=%s: %s", x, got)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "relative/dir") // the spec says: ignore it
	if got, _ := Root(); got != filepath.Join(home, ".local", "state", "mcpbox") {
		t.Errorf("Root with a relative XDG_STATE_HOME: %s", got)
	}
}

func TestKeySeparatesProjects(t *testing.T) {
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "proj a"), filepath.Join(tmp, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "mcpbox.yaml"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	key := func(cfg, dir string) string {
		t.Helper()
		k, err := Key(cfg, dir)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	defA, defB := key("", a), key("", b)
	cfgA, cfgB := key(filepath.Join(a, "mcpbox.yaml"), ""), key(filepath.Join(b, "mcpbox.yaml"), "")
	seen := map[string]string{}
	for what, k := range map[string]string{"default a": defA, "default b": defB, "config a": cfgA, "config b": cfgB} {
		if other, dup := seen[k]; dup {
			t.Errorf("%s and %s share the key %s", what, other, k)
		}
		seen[k] = what
	}
	if !strings.HasPrefix(defA, "proj_a-") || !strings.HasPrefix(cfgA, "proj_a-") || !strings.HasPrefix(defB, "b-") {
		t.Errorf("keys do not start with the project's name: %s %s %s", defA, cfgA, defB)
	}
	// The same project reached through a symlink or a relative path is
	// the same project.
	if k := key("", link); k != defA {
		t.Errorf("default through a symlink: %s, want %s", k, defA)
	}
	if k := key(filepath.Join(link, "mcpbox.yaml"), ""); k != cfgA {
		t.Errorf("config through a symlink: %s, want %s", k, cfgA)
	}
	t.Chdir(a)
	if k := key("mcpbox.yaml", ""); k != cfgA {
		t.Errorf("relative config path: %s, want %s", k, cfgA)
	}
	if _, err := Key("", filepath.Join(tmp, "missing")); err == nil {
		t.Error("Key of a missing dir succeeded")
	}
	if dir, _ := ProjectStateDir("/r", "", b); dir != filepath.Join("/r", "projects", defB) {
		t.Errorf("ProjectStateDir: %s", dir)
	}
}

func TestNameIsOnePathElement(t *testing.T) {
	for in, want := range map[string]string{"/": "root", "..": "_.", ".hidden": "_hidden", "a b/c": "a_b_c", strings.Repeat("x", 60): strings.Repeat("x", 40)} {
		if got := name(in); got != want {
			t.Errorf("name(%q) = %q, want %q", in, got, want)
		}
	}
}

// listen makes the admin socket of a fake instance pid on state.
func listen(t *testing.T, state string, pid int) net.Listener {
	t.Helper()
	if err := MakeDir(state); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", SocketPath(state, pid))
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
			c.Close()
		}
	}()
	return ln
}

func TestRecordsListLiveAndRemoveStale(t *testing.T) {
	// A state dir's path is a config's choice: a pattern's
	// metacharacters in it are plain characters.
	state := filepath.Join(t.TempDir(), "st[x*?")
	live := Record{PID: 1001, Started: time.Now().Add(-time.Minute), Project: "/p", StateDir: state, Transport: "stdio"}
	live2 := Record{PID: 1002, Started: time.Now(), Project: "/p", StateDir: state, Transport: "http", URL: "http://127.0.0.1:1/mcp"}
	dead := Record{PID: 1003, Started: time.Now(), Project: "/p", StateDir: state, Transport: "stdio"}
	listen(t, state, live.PID)
	listen(t, state, live2.PID)
	ln := listen(t, state, dead.PID)
	for _, r := range []Record{live2, live, dead} {
		if err := Write(r); err != nil {
			t.Fatal(err)
		}
	}
	// A crashed instance's socket stays as a file nobody listens on.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	// A socket of an instance that has not written its record yet.
	listen(t, state, 1004)
	// And one that died before it wrote it.
	orphan := listen(t, state, 1005)
	orphan.(*net.UnixListener).SetUnlinkOnClose(false)
	orphan.Close()

	recs, err := List(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].PID != live.PID || recs[1].PID != live2.PID || recs[1].URL != live2.URL {
		t.Fatalf("List: %+v, want the live 1001 then 1002", recs)
	}
	gone, err := RemoveStale(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 2 || !((gone[0] == 1003 && gone[1] == 1005) || (gone[0] == 1005 && gone[1] == 1003)) {
		t.Errorf("RemoveStale removed %v, want 1003 and 1005", gone)
	}
	for _, p := range []string{recordPath(state, 1003), SocketPath(state, 1003), SocketPath(state, 1005)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s after RemoveStale: %v", p, err)
		}
	}
	for _, p := range []string{recordPath(state, 1001), SocketPath(state, 1001), SocketPath(state, 1004)} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("a live instance's %s after RemoveStale: %v", p, err)
		}
	}
	Remove(state, 1001)
	if recs, _ := List(state); len(recs) != 1 || recs[0].PID != 1002 {
		t.Errorf("List after Remove: %+v", recs)
	}
}

func TestListIgnoresAForeignStateDirField(t *testing.T) {
	state, other := t.TempDir(), t.TempDir()
	listen(t, state, 7)
	listen(t, other, 7)
	// A record claiming another state dir is read as this one's: its
	// socket is the one beside it.
	if err := Write(Record{PID: 7, StateDir: other}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(recordPath(other, 7), recordPath(state, 7)); err != nil {
		t.Fatal(err)
	}
	recs, _ := List(state)
	if len(recs) != 1 || recs[0].StateDir != state || recs[0].Socket() != SocketPath(state, 7) {
		t.Errorf("List: %+v", recs)
	}
}

func TestRegistry(t *testing.T) {
	root := t.TempDir()
	a, b, gone := t.TempDir(), filepath.Join(t.TempDir(), "st[x"), filepath.Join(t.TempDir(), "gone")
	for _, d := range []string{b, gone} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{a, b, a, gone} {
		if err := Register(root, d); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(gone)
	dirs, err := StateDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{a, b}
	if a > b {
		want = []string{b, a}
	}
	if len(dirs) != 2 || dirs[0] != want[0] || dirs[1] != want[1] {
		t.Errorf("StateDirs: %v, want %v", dirs, want)
	}
	if ents, _ := os.ReadDir(registryDir(root)); len(ents) != 2 {
		t.Errorf("the registry keeps %d links, want 2 (the dangling one removed)", len(ents))
	}
	listen(t, a, 1)
	listen(t, b, 2)
	Write(Record{PID: 1, StateDir: a})
	Write(Record{PID: 2, StateDir: b})
	Write(Record{PID: 3, StateDir: b}) // dead: no socket
	// A state dir that cannot be listed hides no other.
	broken := t.TempDir()
	if err := os.WriteFile(Dir(broken), []byte("not a dir"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Register(root, broken); err != nil {
		t.Fatal(err)
	}
	all, err := All(root)
	if err != nil || len(all) != 2 {
		t.Errorf("All: %+v, %v; want instances 1 and 2", all, err)
	}
}

func TestLockSerializesStarts(t *testing.T) {
	state := t.TempDir()
	unlock, err := Lock(state)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		u, err := Lock(state)
		if err == nil {
			u()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a second Lock did not wait for the first")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("a second Lock did not get the lock once it was free")
	}
}

// TestOverlayLockOnePerAgent: two sandboxes (of two instances) must not
// mount one input overlay: the second launch is refused with a message
// naming the way out, and gets it once the first has ended.
func TestOverlayLockOnePerAgent(t *testing.T) {
	base := t.TempDir()
	release, err := LockOverlay(base)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := LockOverlay(base); !errors.Is(err, ErrOverlayBusy) || !strings.Contains(err.Error(), "scope: session") {
		t.Fatalf("a second lock: %v, want ErrOverlayBusy naming scope: session", err)
	}
	if d := time.Since(start); d < OverlayLockWait {
		t.Errorf("the second lock gave up after %v, want %v (a restart's old sandbox may still be ending)", d, OverlayLockWait)
	}
	// A sandbox that ends while the next waits hands it over.
	time.AfterFunc(200*time.Millisecond, release)
	again, err := LockOverlay(base)
	if err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	again()
	evil := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(evil, "overlay.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := LockOverlay(evil); err == nil {
		t.Error("LockOverlay followed a symlinked overlay.lock")
	}
}
