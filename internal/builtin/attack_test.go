//go:build linux

package builtin

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// plantHostile fills the workspace with what a hostile project could
// contain: symlinks out of the roots and special files.
func plantHostile(t *testing.T, w *workspace) {
	t.Helper()
	links := map[string]string{
		filepath.Join(w.in, "passwd"):       "/etc/passwd",
		filepath.Join(w.in, "outdir"):       w.outside,
		filepath.Join(w.in, "up"):           "../outside/secret.txt",
		filepath.Join(w.in, "sub", "deep"):  "../../outside",
		filepath.Join(w.in, "proc"):         "/proc/self/root/etc/passwd",
		filepath.Join(w.out, "link"):        filepath.Join(w.outside, "secret.txt"),
		filepath.Join(w.out, "linkdir"):     w.outside,
		filepath.Join(w.out, "inner"):       "notes.txt",
		filepath.Join(w.out, "dangling"):    filepath.Join(w.outside, "new.txt"),
		filepath.Join(w.out, "to-input"):    w.in,
		filepath.Join(w.out, "sub", "back"): "..",
	}
	for link, target := range links {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	writeHost(t, filepath.Join(w.out, "notes.txt"), "notes\n")
	writeHost(t, filepath.Join(w.in, "src", "ok.txt"), "fine\n")
	for _, p := range []string{filepath.Join(w.in, "fifo"), filepath.Join(w.out, "fifo")} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPathAttacks(t *testing.T) { bothResolvers(t, testPathAttacks) }

func testPathAttacks(t *testing.T) {
	w := newWorkspace(t, Options{Commands: CommandPolicy{Allow: []string{"pwd"}}})
	plantHostile(t, w)
	const escape = "leaves its root"
	tests := []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"dotdot read", "read_file", map[string]any{"path": "input/../outside/secret.txt"}, escape},
		{"dotdot deep", "read_file", map[string]any{"path": "input/src/../../../../../../etc/passwd"}, escape},
		{"dotdot into other root", "read_file", map[string]any{"path": "input/../out/notes.txt"}, escape},
		{"absolute outside", "read_file", map[string]any{"path": "/etc/passwd"}, `must start with "input/"`},
		{"absolute workspace dotdot", "read_file", map[string]any{"path": "/workspace/../etc/passwd"}, `must start with "input/"`},
		{"bare dotdot", "read_file", map[string]any{"path": "../etc/passwd"}, `must start with "input/"`},
		{"symlink to /etc/passwd", "read_file", map[string]any{"path": "input/passwd"}, escape},
		{"relative symlink out", "read_file", map[string]any{"path": "input/up"}, escape},
		{"magic link", "read_file", map[string]any{"path": "input/proc"}, escape},
		{"through dir symlink", "read_file", map[string]any{"path": "input/outdir/secret.txt"}, escape},
		{"through nested dir symlink", "read_file", map[string]any{"path": "input/sub/deep/secret.txt"}, escape},
		{"list dir symlink", "list_files", map[string]any{"path": "input/outdir"}, escape},
		{"search dir symlink", "search_files", map[string]any{"pattern": "TOPSECRET", "path": "input/outdir"}, escape},
		{"read fifo", "read_file", map[string]any{"path": "input/fifo"}, "is a fifo, not a regular file"},
		{"write into input", "write_file", map[string]any{"path": "input/new.txt", "content": "x"}, "input is read-only"},
		{"write input absolute", "write_file", map[string]any{"path": "/workspace/input/new.txt", "content": "x"}, "input is read-only"},
		{"write dotdot to input", "write_file", map[string]any{"path": "output/../in/new.txt", "content": "x"}, escape},
		{"write dotdot outside", "write_file", map[string]any{"path": "output/../outside/new.txt", "content": "x"}, escape},
		{"write through symlink", "write_file", map[string]any{"path": "output/link", "content": "pwned"}, "is a symlink"},
		{"write through inner symlink", "write_file", map[string]any{"path": "output/inner", "content": "pwned"}, "is a symlink"},
		{"write through dangling symlink", "write_file", map[string]any{"path": "output/dangling", "content": "pwned"}, "is a symlink"},
		{"write under dir symlink", "write_file", map[string]any{"path": "output/linkdir/new.txt", "content": "pwned"}, escape},
		{"mkdir under dir symlink", "write_file", map[string]any{"path": "output/linkdir/a/b.txt", "content": "pwned"}, escape},
		{"write via symlink to input", "write_file", map[string]any{"path": "output/to-input/new.txt", "content": "x"}, escape},
		{"write fifo", "write_file", map[string]any{"path": "output/fifo", "content": "x"}, "is a fifo"},
		{"edit through symlink", "edit_file", map[string]any{"path": "output/link", "old": "TOPSECRET", "new": "x"}, escape},
		{"edit input", "edit_file", map[string]any{"path": "input/src/ok.txt", "old": "fine", "new": "x"}, "input is read-only"},
		{"cwd dotdot", "run_command", map[string]any{"argv": []string{"pwd"}, "cwd": "output/.."}, "leaves its root"},
		{"cwd symlink out", "run_command", map[string]any{"argv": []string{"pwd"}, "cwd": "input/outdir"}, escape},
		{"cwd outside", "run_command", map[string]any{"argv": []string{"pwd"}, "cwd": "/tmp"}, `must start with "input/"`},
		{"nul in path", "read_file", map[string]any{"path": "input/src/ok.txt\x00x"}, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w.mustFail(t, tt.tool, tt.args, tt.want)
		})
	}
	t.Run("nothing changed outside or in input", func(t *testing.T) {
		if b, _ := os.ReadFile(filepath.Join(w.outside, "secret.txt")); string(b) != "TOPSECRET marker\n" {
			t.Errorf("outside file changed: %q", b)
		}
		for _, p := range []string{filepath.Join(w.outside, "new.txt"), filepath.Join(w.outside, "a"), filepath.Join(w.in, "new.txt")} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was created", p)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(w.out, "notes.txt")); string(b) != "notes\n" {
			t.Errorf("symlink target inside output changed: %q", b)
		}
	})
	t.Run("walks do not follow symlinks", func(t *testing.T) {
		got := w.mustOK(t, "search_files", map[string]any{"pattern": "TOPSECRET|root:"})
		if got != "[no matches]\n" {
			t.Errorf("search reached outside: %q", got)
		}
		got = w.mustOK(t, "list_files", map[string]any{"depth": 10})
		if strings.Contains(got, "secret.txt") {
			t.Errorf("listing reached outside:\n%s", got)
		}
		if !strings.Contains(got, "input/outdir  (symlink)") || !strings.Contains(got, "input/fifo  (fifo)") {
			t.Errorf("listing does not mark symlinks and fifos:\n%s", got)
		}
	})
	t.Run("in-root symlink loop is harmless", func(t *testing.T) {
		w.mustOK(t, "write_file", map[string]any{"path": "output/sub/back/looped.txt", "content": "ok"})
		if _, err := os.Stat(filepath.Join(w.out, "looped.txt")); err != nil {
			t.Errorf("write via in-root symlink: %v", err)
		}
	})
}

func TestSpecialFiles(t *testing.T) { bothResolvers(t, testSpecialFiles) }

func testSpecialFiles(t *testing.T) {
	w := newWorkspace(t, Options{})
	l, err := net.Listen("unix", filepath.Join(w.in, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := syscall.Mkfifo(filepath.Join(w.in, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.mustFail(t, "read_file", map[string]any{"path": "input/fifo"}, "is a fifo")
		w.mustFail(t, "read_file", map[string]any{"path": "input/sock"}, "is a socket")
		w.mustFail(t, "edit_file", map[string]any{"path": "output/../in/fifo", "old": "a", "new": "b"}, "leaves its root")
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a special file blocked the server")
	}
	t.Run("device", func(t *testing.T) {
		// /dev/null's numbers: 1,3. mknod needs CAP_MKNOD.
		dev := filepath.Join(w.in, "null")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skipf("cannot create a device node here: %v", err)
		}
		w.mustFail(t, "read_file", map[string]any{"path": "input/null"}, "is a device")
		got := w.mustOK(t, "search_files", map[string]any{"pattern": "x", "path": "input"})
		if got != "[no matches]\n" {
			t.Errorf("search over a device: %q", got)
		}
	})
}
