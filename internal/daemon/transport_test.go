//go:build linux

package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/config"
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

// TestSecondSignalExits: the first signal ends the context (a clean
// stop); a repeat at once is taken for the same act; a second one later,
// while that stop runs, ends the process, with 128 + the signal's number.
func TestSecondSignalExits(t *testing.T) {
	exits := make(chan int, 1)
	old, oldGap := forceExit, repeatGap
	forceExit, repeatGap = func(code int) { exits <- code }, 300*time.Millisecond
	t.Cleanup(func() { forceExit, repeatGap = old, oldGap })
	ctx, stop := SignalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first signal did not end the context")
	}
	// A repeat right away is the same act delivered twice (a closed
	// terminal's SIGHUP from the shell and the kernel): no exit.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exits:
		t.Fatalf("the first signal, or its repeat at once, ended the process (%d)", code)
	case <-time.After(repeatGap + 100*time.Millisecond):
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exits:
		if code != 128+int(syscall.SIGHUP) {
			t.Fatalf("exit status %d after a second SIGHUP, want %d", code, 128+int(syscall.SIGHUP))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second signal while stopping did not end the process")
	}
}

// TestImplicitStdioSaid: serve that took a pipe on its standard input for
// a client says so when a person watches its standard error (cmd | mcpbox
// serve printed nothing but the summary); a client's stderr is not told.
func TestImplicitStdioSaid(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	ptmx, pts := ptytest.Open(t)
	d := &daemon{o: Options{Stdin: r, Stderr: pts}, c: &config.Config{}}
	d.chooseTransports()
	if !d.stdio {
		t.Fatal("a pipe was not taken for a client")
	}
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 512)
		n, _ := ptmx.Read(buf)
		got <- string(buf[:n])
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, "speaking MCP on standard input and output") || !strings.Contains(s, "--http ADDR") {
			t.Errorf("the terminal read %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the terminal")
	}
	var quiet strings.Builder
	d = &daemon{o: Options{Stdin: r, Stderr: &quiet}, c: &config.Config{}}
	if d.chooseTransports(); !d.stdio || quiet.Len() != 0 {
		t.Errorf("stdio %v; a client's stderr was told %q", d.stdio, quiet.String())
	}
}
