//go:build linux

package daemon

import (
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blocking reports whether f's open file is in blocking mode.
func blocking(t *testing.T, f *os.File) bool {
	t.Helper()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	sc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.O_NONBLOCK == 0
}

// TestClientInputPipe: a client's pipe is read through a new open file of
// it, the client's own stays blocking, and a hang-up is the end.
func TestClientInputPipe(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	pr.Fd() // blocking, as an inherited standard input is
	in := clientInput(pr)
	defer in.Close()
	oc, ok := in.(*onceCloser)
	if !ok {
		t.Fatalf("clientInput(pipe) = %T, want a new file", in)
	}
	nf, ok := oc.Reader.(*os.File)
	if !ok || nf == pr {
		t.Fatalf("clientInput(pipe) = %T %v, want a new file", in, in)
	}
	if blocking(t, nf) || !blocking(t, pr) {
		t.Fatalf("modes: new blocking %v, original blocking %v; want false, true", blocking(t, nf), blocking(t, pr))
	}
	if _, err := pw.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	got, err := io.ReadAll(in)
	if err != nil || string(got) != "line\n" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// TestClientInputSocket: a socket is read non-blocking while the session
// lasts and is blocking again after.
func TestClientInputSocket(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer ours.Close()
	defer theirs.Close()
	if !blocking(t, ours) {
		t.Fatal("socketpair end is not blocking to begin with")
	}
	in := clientInput(ours)
	if _, err := theirs.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if n, err := in.Read(buf); n != 1 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if blocking(t, ours) {
		t.Fatal("socket still blocking while read through the poller")
	}
	in.Close()
	in.Close() // the session and the gateway both close it
	if !blocking(t, ours) {
		t.Fatal("socket left non-blocking after release")
	}
}

// TestClientInputOther: anything but a pipe or a socket is read as it is.
func TestClientInputOther(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := clientInput(f)
	if _, ok := in.(*onceCloser); ok {
		t.Fatalf("clientInput(file) = %T, want the file as it is", in)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	in.Close() // does not close standard input itself
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatalf("the file after Close: %v", err)
	}
	if got, err := io.ReadAll(in); err != nil || string(got) != "x" {
		t.Fatalf("read %q, %v; want the file's content", got, err)
	}
}

// TestClientOutputPipe: a client's pipe is written through a new,
// non-blocking open file of it (what the gateway's raw writes need), the
// client's own stays blocking, and what is written arrives whole.
func TestClientOutputPipe(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	pw.Fd() // blocking, as an inherited standard output is
	out, release := clientOutput(pw)
	nf, ok := out.(*os.File)
	if !ok || nf == pw {
		release()
		t.Fatalf("clientOutput(pipe) = %T %v, want a new file", out, out)
	}
	if blocking(t, nf) || !blocking(t, pw) {
		release()
		t.Fatalf("modes: new blocking %v, original blocking %v; want false, true", blocking(t, nf), blocking(t, pw))
	}
	// More than a pipe holds, through the gateway's writer: the rest
	// waits for room.
	msg := make([]byte, 1<<20)
	for i := range msg {
		msg[i] = byte('a' + i%26)
	}
	_, w, release2 := clientStdio(nil, pw)
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(msg)
		release2()
		release()
		pw.Close()
		done <- err
	}()
	got, err := io.ReadAll(pr)
	if werr := <-done; werr != nil || err != nil || string(got) != string(msg) {
		t.Fatalf("wrote %v; read %d bytes (want %d), %v", werr, len(got), len(msg), err)
	}
}

// TestClientOutputOther: a file (anything but a pipe or a socket) is
// written as it is.
func TestClientOutputOther(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, release := clientOutput(f)
	defer release()
	if out != io.Writer(f) {
		t.Fatalf("clientOutput(file) = %v, want the file", out)
	}
}

// TestClientStdioOneSocket: standard input and output are one socket
// (inetd, socat's EXEC, a socket-activated service), blocking as
// inherited. clientInput makes it non-blocking for its reads, which the
// output shares: a message larger than the socket holds must still be
// written whole, waiting for the client to read, not fail with EAGAIN
// halfway (os.Stdout, made while it was blocking, cannot wait).
func TestClientStdioOneSocket(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "stdio") // blocking: not polled, as os.Stdout
	if err := unix.SetNonblock(fds[1], true); err != nil {
		t.Fatal(err)
	}
	peer := os.NewFile(uintptr(fds[1]), "client") // polled: its read deadline holds
	defer f.Close()
	defer peer.Close()
	in, out, release := clientStdio(f, f)
	msg := make([]byte, 4<<20)
	for i := range msg {
		msg[i] = byte('a' + i%26)
	}
	done := make(chan error, 1)
	go func() {
		_, err := out.Write(msg)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // the socket fills up first
	got := make([]byte, len(msg))
	peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Errorf("the client read: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("writing %d bytes: %v", len(msg), err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not end")
	}
	if string(got) != string(msg) {
		t.Error("the client read other bytes than were written")
	}
	release()
	in.Close()
	if !blocking(t, f) {
		t.Error("the socket stays non-blocking after the session")
	}
}
