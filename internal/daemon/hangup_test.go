//go:build linux

package daemon

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

// TestWatchHangup: a client's pipe or socket that hangs up with nothing
// left to read is gone; one that left messages, or is still there, is
// not, and nothing is read from it.
func TestWatchHangup(t *testing.T) {
	pipe := func(t *testing.T) (ours, theirs *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}
	socket := func(t *testing.T) (ours, theirs *os.File) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		o, th := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
		t.Cleanup(func() { o.Close(); th.Close() })
		return o, th
	}
	for _, tt := range []struct {
		name   string
		open   func(*testing.T) (*os.File, *os.File)
		client func(*testing.T, *os.File) // what the client does
		gone   bool
		left   int // bytes the client left to read
	}{
		{"pipe closed", pipe, func(t *testing.T, w *os.File) { w.Close() }, true, 0},
		{"pipe written and closed", pipe, func(t *testing.T, w *os.File) { w.Write([]byte("{}\n")); w.Close() }, false, 3},
		{"pipe open", pipe, func(*testing.T, *os.File) {}, false, 0},
		{"pipe written", pipe, func(t *testing.T, w *os.File) { w.Write([]byte("{}\n")) }, false, 3},
		{"socket closed", socket, func(t *testing.T, w *os.File) { w.Close() }, true, 0},
		{"socket shut for writing", socket, func(t *testing.T, w *os.File) {
			if err := unix.Shutdown(int(w.Fd()), unix.SHUT_WR); err != nil {
				t.Fatal(err)
			}
		}, true, 0},
		{"socket written and closed", socket, func(t *testing.T, w *os.File) { w.Write([]byte("{}\n")); w.Close() }, false, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ours, theirs := tt.open(t)
			called := make(chan struct{})
			stop := watchHangup(ours, func() { close(called) })
			defer stop()
			tt.client(t, theirs)
			select {
			case <-called:
				if !tt.gone {
					t.Fatal("gone, for a client that is not")
				}
			case <-time.After(500 * time.Millisecond):
				if tt.gone {
					t.Fatal("a client that hung up is not gone after 500 ms")
				}
			}
			stop()
			stop()
			if tt.gone {
				return
			}
			// Nothing was read: the session gets every byte.
			if n, err := unix.IoctlGetInt(int(ours.Fd()), unix.TIOCINQ); err != nil {
				t.Fatal(err)
			} else if n != tt.left {
				t.Fatalf("%d bytes left to read, want %d", n, tt.left)
			}
		})
	}
	t.Run("file", func(t *testing.T) {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		stop := watchHangup(f, func() { t.Error("a file is gone") })
		stop()
	})
}

// hungRegistry is a loopback listener that accepts connections and
// never answers: an npm registry that hangs.
func hungRegistry(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	})
	return "http://" + ln.Addr().String() + "/"
}

// TestSetupEndsWhenClientHangsUp: a stdio client that hangs up while
// serve (or run) installs a package from a registry that hangs ends the
// install and the gateway, with no error: before, they went on for the
// install's five minutes, for no one.
func TestSetupEndsWhenClientHangsUp(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("NPM_CONFIG_REGISTRY", hungRegistry(t))
	t.Setenv("npm_config_registry", "")
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  s: {package: 'npm:@mcpbox-e2e/hangs', tools: {allow: ['*']}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"serve", "run"} {
		t.Run(what, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			state := filepath.Join(t.TempDir(), "state")
			var installing atomic.Bool
			done := make(chan error, 1)
			go func() {
				if what == "serve" {
					done <- Run(context.Background(), Options{Config: c, Stdio: true, Stdin: r, Stdout: io.Discard,
						Stderr: progressSeen(&installing), StateDir: state, Base: t.TempDir()})
					return
				}
				done <- RunServer(context.Background(), ServerOptions{Name: "hangs",
					Spec:  sandbox.Spec{Args: []string{"npx", "-y", "@mcpbox-e2e/hangs"}},
					Stdin: r, Stdout: io.Discard, Stderr: progressSeen(&installing), StateDir: state})
			}()
			for i := 0; !installing.Load(); i++ {
				if i == 300 {
					t.Fatal("no install began within 30 s")
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // waiting for the registry
			w.Close()                          // the client gives up
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s after its client hung up: %v, want nil", what, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s still installing 30 s after its client hung up", what)
			}
		})
	}
}

// progressSeen is a writer that sets seen once an install's progress
// line is written to it.
func progressSeen(seen *atomic.Bool) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if len(p) > 0 {
			seen.Store(true)
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
