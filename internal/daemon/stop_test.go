//go:build linux

package daemon

import (
	"context"
	"io"
	"os"
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
