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

// TestWatchHangup: a client that no longer reads the answers is gone,
// whatever it wrote (an editor that crashed with its initialize unread);
// one whose requests merely ended (a script, serve --stdio < /dev/null
// to see the start-up's errors) or that is still there is not, and
// nothing is read from its requests.
func TestWatchHangup(t *testing.T) {
	// Each opens the gateway's ends of the requests and the answers, and
	// the client's.
	pipe := func(t *testing.T) (in, out, clientIn, clientOut *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		ar, aw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close(); ar.Close(); aw.Close() })
		return r, aw, w, ar
	}
	socket := func(t *testing.T) (in, out, clientIn, clientOut *os.File) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		o, th := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
		t.Cleanup(func() { o.Close(); th.Close() })
		return o, o, th, th // one socket both ways, as inetd gives it
	}
	write := func(t *testing.T, f *os.File) {
		if _, err := f.Write([]byte("{}\n")); err != nil {
			t.Fatal(err)
		}
	}
	shutWrite := func(t *testing.T, f *os.File) {
		if err := unix.Shutdown(int(f.Fd()), unix.SHUT_WR); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		open func(*testing.T) (in, out, clientIn, clientOut *os.File)
		// What the client does to its ends of the requests and answers.
		client func(t *testing.T, in, out *os.File)
		gone   bool
		left   int // bytes the client left to read
	}{
		{"still there", pipe, func(*testing.T, *os.File, *os.File) {}, false, 0},
		{"requests written", pipe, func(t *testing.T, in, _ *os.File) { write(t, in) }, false, 3},
		{"requests ended", pipe, func(t *testing.T, in, _ *os.File) { in.Close() }, false, 0},
		{"requests written and ended", pipe, func(t *testing.T, in, _ *os.File) { write(t, in); in.Close() }, false, 3},
		{"answers unread", pipe, func(t *testing.T, _, out *os.File) { out.Close() }, true, 0},
		{"requests written, both closed", pipe, func(t *testing.T, in, out *os.File) { write(t, in); in.Close(); out.Close() }, true, 3},
		{"socket closed", socket, func(t *testing.T, in, _ *os.File) { in.Close() }, true, 0},
		{"socket written and closed", socket, func(t *testing.T, in, _ *os.File) { write(t, in); in.Close() }, true, 3},
		{"socket shut for writing", socket, func(t *testing.T, in, _ *os.File) { shutWrite(t, in) }, false, 0},
		{"socket written and shut for writing", socket, func(t *testing.T, in, _ *os.File) { write(t, in); shutWrite(t, in) }, false, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ours, answers, theirs, client := tt.open(t)
			called := make(chan struct{})
			stop := watchHangup(answers, func() { close(called) })
			defer stop()
			tt.client(t, theirs, client)
			select {
			case <-called:
				if !tt.gone {
					t.Fatal("gone, for a client that is not")
				}
			case <-time.After(500 * time.Millisecond):
				if tt.gone {
					t.Fatal("a client that went away is not gone after 500 ms")
				}
			}
			stop()
			stop()
			// Nothing was read: the session gets every byte.
			if n, err := unix.IoctlGetInt(int(ours.Fd()), unix.TIOCINQ); err != nil {
				t.Fatal(err)
			} else if n != tt.left {
				t.Fatalf("%d bytes left to read, want %d", n, tt.left)
			}
		})
	}
	t.Run("file", func(t *testing.T) {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
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

// TestSetupEndsWhenClientHangsUp: a stdio client that goes away while
// serve (or run) installs a package from a registry that hangs, its
// initialize written and unread (a client that timed out, an editor that
// crashed), ends the install and the gateway, with no error: before,
// they went on until the install gave up, for no one.
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
			ar, aw, err := os.Pipe() // the answers
			if err != nil {
				t.Fatal(err)
			}
			defer ar.Close()
			defer aw.Close()
			init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
			if _, err := w.Write([]byte(init)); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(t.TempDir(), "state")
			var installing atomic.Bool
			done := make(chan error, 1)
			go func() {
				if what == "serve" {
					done <- Run(context.Background(), Options{Config: c, Stdio: true, Stdin: r, Stdout: aw,
						Stderr: progressSeen(&installing), StateDir: state, Base: t.TempDir()})
					return
				}
				done <- RunServer(context.Background(), ServerOptions{Name: "hangs",
					Spec:  sandbox.Spec{Args: []string{"npx", "-y", "@mcpbox-e2e/hangs"}},
					Stdin: r, Stdout: aw, Stderr: progressSeen(&installing), StateDir: state})
			}()
			for i := 0; !installing.Load(); i++ {
				if i == 300 {
					t.Fatal("no install began within 30 s")
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // waiting for the registry
			w.Close()                          // the client goes away
			ar.Close()
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
