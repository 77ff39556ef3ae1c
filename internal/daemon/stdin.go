package daemon

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"mcpbox/internal/gateway"
)

// clientInput is what a stdio gateway reads its client from. Closing it
// ends a read that waits for the client, so that a gateway told to stop
// (SIGTERM, Ctrl-C) stops while its client still holds the pipe open; it
// may be closed more than once.
//
// Standard input as a process inherits it is blocking, so Go reads it
// with a thread parked in read(2), and while that thread waits the
// runtime's monitor takes its processor back every few tens of µs: on a
// small tool call a third of the gateway's CPU went to the scheduler
// (issue 19). Read through the poller instead, the wait costs nothing:
//   - a pipe (what most clients give) is opened again through
//     /proc/self/fd, a new open file of the same pipe that alone is
//     non-blocking: the client's end, and anyone else sharing ours, keep
//     their mode; closing it closes only that new file;
//   - a socket (Node's child_process) cannot be opened again: a copy of
//     it is made non-blocking, and blocking again before it is closed.
//
// Anything else (a terminal, a file), and any failure, reads r as it is,
// and its Close does nothing: standard input itself stays open.
func clientInput(r io.Reader) io.ReadCloser {
	f, ok := r.(*os.File)
	if !ok {
		return io.NopCloser(r)
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return io.NopCloser(r)
	}
	var st unix.Stat_t
	var fd int
	if cerr := sc.Control(func(u uintptr) {
		fd = int(u)
		err = unix.Fstat(fd, &st)
	}); cerr != nil || err != nil {
		return io.NopCloser(r)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		// O_NONBLOCK: opening a pipe's read end otherwise waits for a
		// writer, which a client that has already hung up is not.
		nf, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return io.NopCloser(r)
		}
		return &onceCloser{Reader: nf, close: nf.Close}
	case unix.S_IFSOCK:
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return io.NopCloser(r)
		}
		if err := unix.SetNonblock(dup, true); err != nil {
			unix.Close(dup)
			return io.NopCloser(r)
		}
		nf := os.NewFile(uintptr(dup), f.Name()) // non-blocking: polled
		return &onceCloser{Reader: nf, close: func() error {
			// Before Close: the mode belongs to the shared socket.
			if sc, err := nf.SyscallConn(); err == nil {
				sc.Control(func(u uintptr) { unix.SetNonblock(int(u), false) })
			}
			return nf.Close()
		}}
	}
	return io.NopCloser(r)
}

// onceCloser is a reader whose close runs once, however often Close is
// called: by the session that ends, and by the gateway after it.
type onceCloser struct {
	io.Reader
	once  sync.Once
	close func() error
}

func (c *onceCloser) Close() error {
	var err error
	c.once.Do(func() { err = c.close() })
	return err
}

// clientOutput is what a stdio gateway writes its client's messages to,
// and a function that releases it once the session is over. Standard
// output as a process inherits it is blocking, and a blocking write
// cannot take the gateway's raw path (gateway.StdioFile): a pipe is
// opened again through /proc/self/fd, non-blocking, as clientInput does.
// A socket gets a copy of its own, left in the mode the socket has: when
// it is the one socket standard input is too (inetd, socat's EXEC,
// socket-activated services), clientInput has made it non-blocking, and
// os.Stdout, made when it was blocking, would fail a write that does not
// fit at once with EAGAIN, mid-message, where the copy, made since,
// waits for room. Anything else (a terminal, a file), and any failure,
// is written as it is; only a file made here is new (the raw path is
// not for a file others share the mode of).
func clientOutput(w io.Writer) (io.Writer, func()) {
	f, ok := w.(*os.File)
	if !ok {
		return w, func() {}
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return w, func() {}
	}
	var st unix.Stat_t
	var fd int
	if cerr := sc.Control(func(u uintptr) {
		fd = int(u)
		err = unix.Fstat(fd, &st)
	}); cerr != nil || err != nil {
		return w, func() {}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		// O_NONBLOCK: without a reader (the client gone) the open fails
		// rather than waiting for one.
		nf, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_WRONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return w, func() {}
		}
		return nf, func() { nf.Close() }
	case unix.S_IFSOCK:
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return w, func() {}
		}
		nf := os.NewFile(uintptr(dup), f.Name()) // polled if non-blocking now
		return nf, func() { nf.Close() }
	}
	return w, func() {}
}

// clientStdio is a stdio gateway's client input and output, as ServeStdio
// takes them, and a function that releases them. The input is closed by
// the session when it ends (clientInput: a waiting read ends with it);
// the output is never closed by it.
func clientStdio(r io.Reader, w io.Writer) (io.ReadCloser, io.WriteCloser, func()) {
	in := clientInput(r)
	if oc, ok := in.(*onceCloser); ok {
		if f, ok := oc.Reader.(*os.File); ok {
			// Raw reads; closing still closes f, which ends a read
			// waiting in the poller.
			oc.Reader = gateway.StdioFile(f)
		}
	}
	out, releaseOut := clientOutput(w)
	var wc io.WriteCloser = nopWriteCloser{out}
	if f, ok := out.(*os.File); ok && out != w { // a file of its own (not a terminal's)
		wc = gateway.StdioFile(f)
	}
	return in, wc, func() { releaseOut(); in.Close() }
}
