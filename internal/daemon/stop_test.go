//go:build linux

package daemon

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/sandbox"
)

// TestRunServerStopsWithClientAttached: mcpbox run stops when it is told
// to (SIGTERM, SIGINT: its context ends) while its client still holds
// standard input open, as a client that sends SIGTERM before it closes the
// pipe does, or a person who presses Ctrl-C. It used to keep reading the
// pipe until the client closed it.
func TestRunServerStopsWithClientAttached(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close() // the client's end stays open until the test ends
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunServer(ctx, ServerOptions{
			Name: "idle", Spec: sandbox.Spec{Args: []string{"true"}},
			Stdin: pr, Stdout: io.Discard, Stderr: io.Discard,
		})
	}()
	time.Sleep(200 * time.Millisecond) // the session is reading its client
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunServer after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunServer still serving 10 s after its context ended, its client's pipe open")
	}
}

// TestRunServerWarnsMissingCommand: mcpbox run says at once that its
// command is nowhere the sandbox looks, as serve's start-up line does;
// before, it said nothing unless a client stayed to hear the start fail.
func TestRunServerWarnsMissingCommand(t *testing.T) {
	for _, tt := range []struct {
		prog string
		warn bool
	}{{"no-such-server-bin-7f3a", true}, {"true", false}} {
		var stderr safeBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := RunServer(ctx, ServerOptions{
			Name: "x", Spec: sandbox.Spec{Args: []string{tt.prog}},
			Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr,
		})
		cancel()
		if err != nil {
			t.Fatalf("RunServer %s: %v", tt.prog, err)
		}
		if got := strings.Contains(stderr.String(), tt.prog+" is in none of the sandbox's PATH directories"); got != tt.warn {
			t.Errorf("RunServer %s: warned %v, want %v; stderr:\n%s", tt.prog, got, tt.warn, stderr.String())
		}
	}
}

// safeBuffer is a bytes.Buffer for writers on several goroutines.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunServerNeverStarted: a run whose server never started for its
// client fails with how its start failed (before, it exited 0); a run
// that no client opened a session on does not.
func TestRunServerNeverStarted(t *testing.T) {
	var stderr safeBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	err := RunServer(ctx, ServerOptions{
		Name: "x", Spec: sandbox.Spec{Args: []string{"no-such-server-bin-7f3a"}},
		Stdin: strings.NewReader(init), Stdout: io.Discard, Stderr: &stderr,
	})
	if err == nil || !strings.Contains(err.Error(), "server x never started: it failed to start") {
		t.Fatalf("RunServer of a server that cannot start: %v, want why it never started\nstderr:\n%s", err, stderr.String())
	}
}
