//go:build linux

package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
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

// TestRawSocketNeverBlocks: a socket's mode is its open file's, shared
// with whoever else holds it (the client's parent, the daemon making
// standard input blocking again at the session's end). Made blocking
// under a raw reader or writer, a read with nothing to read and a write
// with no room must not wait in the raw system call, where the thread
// holds its processor and cannot be preempted: the runtime's
// stop-the-world (a garbage collection) would wait for the client, and
// the whole gateway with it. The read waits in the poller, here until its
// deadline; the raw write returns what fitted at once. Run in a process
// of its own, which such a wait hangs for good (the runtime's preemption
// signals keep restarting it).
func TestRawSocketNeverBlocks(t *testing.T) {
	if os.Getenv("MCPBOX_TEST_RAWSOCK") == "1" {
		rawSocketNeverBlocks(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRawSocketNeverBlocks$", "-test.v")
	cmd.Env = append(os.Environ(), "MCPBOX_TEST_RAWSOCK=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("a raw read or write waited in the kernel: the process hung, killed after 60s\n%s", out)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func rawSocketNeverBlocks(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "client") // non-blocking: polled
	peer := os.NewFile(uintptr(fds[1]), "peer")
	defer f.Close()
	defer peer.Close()
	rf := newRawFile(f)
	if rf == nil {
		t.Fatal("a non-blocking socket is not read raw")
	}
	// Another holder of the open file makes it blocking. A wait in the
	// kernel that no signal interrupts ends after 3s.
	other, err := syscall.Dup(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(other)
	if err := syscall.SetNonblock(other, false); err != nil {
		t.Fatal(err)
	}
	tv := syscall.Timeval{Sec: 3}
	for _, opt := range []int{syscall.SO_RCVTIMEO, syscall.SO_SNDTIMEO} {
		if err := syscall.SetsockoptTimeval(fds[0], syscall.SOL_SOCKET, opt, &tv); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	f.SetReadDeadline(start.Add(200 * time.Millisecond))
	if _, err := rf.Read(make([]byte, 512)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a read with nothing to read: %v, want its deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a read with nothing to read waited %v in the kernel", d.Round(time.Millisecond))
	}
	start = time.Now()
	n := rf.tryWrite(make([]byte, 16<<20))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a write with no room waited %v in the kernel", d.Round(time.Millisecond))
	}
	if n <= 0 || n >= 16<<20 {
		t.Errorf("the raw write took %d bytes, want what fitted", n)
	}
}

// TestHungUp: a client's output is gone once the reader of a pipe, or
// the peer of a socket, has closed its end; not before, and not when the
// peer only shut down its own sending side (it still reads).
func TestHungUp(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if hungUp(StdioFile(w)) || hungUp(w) {
		t.Fatal("a pipe with its reader open taken as hung up")
	}
	r.Close()
	if !hungUp(StdioFile(w)) || !hungUp(w) {
		t.Fatal("a pipe whose reader closed not taken as hung up")
	}

	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, peer := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "peer")
	defer ours.Close()
	syscall.Shutdown(fds[1], syscall.SHUT_WR)
	if hungUp(ours) {
		t.Fatal("a socket whose peer only stopped sending taken as hung up")
	}
	peer.Close()
	if !hungUp(ours) {
		t.Fatal("a socket whose peer closed not taken as hung up")
	}
	if hungUp(io.Discard) {
		t.Fatal("a writer that is no file taken as hung up")
	}
}
