//go:build linux

package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	pts, err = os.OpenFile(filepath.Join("/dev/pts", strconv.Itoa(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// TestStdinIsClient: serve speaks stdio to a pipe, a socket or a file,
// and HTTP to a person's terminal, to /dev/null (a service manager) and
// to a standard input it cannot examine.
func TestStdinIsClient(t *testing.T) {
	tests := []struct {
		name  string
		stdin func(t *testing.T) *os.File
		want  bool
	}{
		{"terminal", func(t *testing.T) *os.File { _, pts := openPTY(t); return pts }, false},
		{"/dev/null", func(t *testing.T) *os.File { return openT(t, os.DevNull) }, false},
		{"pipe", func(t *testing.T) *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			return r
		}, true},
		{"socket", func(t *testing.T) *os.File {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
			t.Cleanup(func() { a.Close(); b.Close() })
			return a
		}, true},
		{"file", func(t *testing.T) *os.File {
			p := filepath.Join(t.TempDir(), "requests.jsonl")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return openT(t, p)
		}, true},
		{"closed", func(t *testing.T) *os.File {
			f := openT(t, os.DevNull)
			f.Close()
			return f
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stdinIsClient(tt.stdin(t)); got != tt.want {
				t.Errorf("stdinIsClient = %v, want %v", got, tt.want)
			}
		})
	}
	if !stdinIsClient(strings.NewReader("")) {
		t.Error("a reader handed to Main is not taken as a client's stream")
	}
}

func openT(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
