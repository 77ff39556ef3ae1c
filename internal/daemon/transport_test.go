//go:build linux

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/ptytest"

	"golang.org/x/sys/unix"
)

// TestStdinIsClient: serve speaks stdio to a pipe, a socket or a file,
// and HTTP to a person's terminal, to /dev/null (a service manager) and
// to a standard input it cannot examine.
func TestStdinIsClient(t *testing.T) {
	tests := []struct {
		name  string
		stdin func(t *testing.T) *os.File
		want  bool
	}{
		{"terminal", func(t *testing.T) *os.File { _, pts := ptytest.Open(t); return pts }, false},
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
