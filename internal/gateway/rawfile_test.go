//go:build linux

package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestRawFileTaken: a server's pipes (non-blocking, as os.Pipe makes
// them) are read and written raw; a blocking file is used as it is.
func TestRawFileTaken(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	c := newLineConn(r, w, w, "server t", 0, func(string, []byte) {})
	if c.raw == nil {
		t.Error("the write end is not written raw")
	}
	if newRawFile(r) == nil {
		t.Error("the read end is not read raw")
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	br, bw := os.NewFile(uintptr(fds[0]), "br"), os.NewFile(uintptr(fds[1]), "bw")
	defer br.Close()
	defer bw.Close()
	if newRawFile(br) != nil || newRawFile(bw) != nil {
		t.Error("a blocking pipe is read or written raw (it would hold its processor while it waits)")
	}
	if c := newLineConn(br, bw, bw, "server t", 0, func(string, []byte) {}); c.raw != nil {
		t.Error("lineConn writes a blocking pipe raw")
	}
}

// TestRawFileLines: messages larger than a pipe holds, in both
// directions, arrive whole and in order; the end of the input is io.EOF.
func TestRawFileLines(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := newLineConn(r, w, w, "server t", 0, func(string, []byte) {})
	big := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", 1<<20) + `"}}`
	msgs := []string{`{"jsonrpc":"2.0","id":2,"result":{}}`, big, `{"jsonrpc":"2.0","method":"notifications/x"}`}
	go func() {
		defer w.Close()
		for _, m := range msgs {
			msg, err := decodeMessage([]byte(m))
			if err != nil {
				t.Errorf("decoding %.40s: %v", m, err)
				return
			}
			// Through lineConn's own writer: what does not fit at once
			// waits for the reader.
			if err := c.Write(context.Background(), msg); err != nil {
				t.Errorf("writing: %v", err)
				return
			}
		}
	}()
	for _, m := range msgs {
		msg, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		data, err := encodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, []byte(m)) {
			t.Fatalf("read %.80s (%d bytes), want %.80s (%d bytes)", data, len(data), m, len(m))
		}
	}
	if _, err := c.Read(context.Background()); err != io.EOF {
		t.Fatalf("after the writer closed: %v, want io.EOF", err)
	}
}

// TestRawFileClose: closing unblocks a read waiting for input, and reads
// after it fail as os.File's do.
func TestRawFileClose(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rf := newRawFile(r)
	done := make(chan error, 1)
	go func() {
		_, err := rf.Read(make([]byte, 16))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it wait in the poller
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read after close: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock a waiting read")
	}
	if _, err := rf.Read(make([]byte, 16)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read of a closed file: %v, want os.ErrClosed", err)
	}
}

// TestRawWriteKeepsDeadline: a server that stops reading still fails a
// write at its deadline once the pipe is full: the raw write only takes
// what fits at once.
func TestRawWriteKeepsDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := newLineConn(r, w, w, "server t", 0, func(string, []byte) {})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	big := &jsonrpc.Response{ID: mustID(t, float64(1)), Result: []byte(`"` + strings.Repeat("y", 1<<20) + `"`)}
	start := time.Now()
	err = c.Write(ctx, big)
	if err == nil || !strings.Contains(err.Error(), "stopped reading") {
		t.Fatalf("write to a full pipe: %v, want the server stopped reading", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the write took %v", d)
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
