package daemon

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"mcpbox/internal/gateway"
)

// clientInput is what a stdio gateway reads its client from, and a
// function that releases it once the session is over.
//
// Standard input as a process inherits it is blocking, so Go reads it
// with a thread parked in read(2), and while that thread waits the
// runtime's monitor takes its processor back every few tens of µs: on a
// small tool call a third of the gateway's CPU went to the scheduler
// (issue 19). Read through the poller instead, the wait costs nothing:
//   - a pipe (what most clients give) is opened again through
//     /proc/self/fd, a new open file of the same pipe that alone is
//     non-blocking: the client's end, and anyone else sharing ours, keep
//     their mode;
//   - a socket (Node's child_process) cannot be opened again: a copy of
//     it is made non-blocking, and blocking again when the session ends.
//
// Anything else (a terminal, a file), and any failure, reads r as it is.
func clientInput(r io.Reader) (io.Reader, func()) {
	f, ok := r.(*os.File)
	if !ok {
		return r, func() {}
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return r, func() {}
	}
	var st unix.Stat_t
	var fd int
	if cerr := sc.Control(func(u uintptr) {
		fd = int(u)
		err = unix.Fstat(fd, &st)
	}); cerr != nil || err != nil {
		return r, func() {}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		// O_NONBLOCK: opening a pipe's read end otherwise waits for a
		// writer, which a client that has already hung up is not.
		nf, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return r, func() {}
		}
		return nf, func() { nf.Close() }
	case unix.S_IFSOCK:
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return r, func() {}
		}
		if err := unix.SetNonblock(dup, true); err != nil {
			unix.Close(dup)
			return r, func() {}
		}
		nf := os.NewFile(uintptr(dup), f.Name()) // non-blocking: polled
		return nf, func() {
			// Before Close: the mode belongs to the shared socket.
			if sc, err := nf.SyscallConn(); err == nil {
				sc.Control(func(u uintptr) { unix.SetNonblock(int(u), false) })
			}
			nf.Close()
		}
	}
	return r, func() {}
}

// clientOutput is what a stdio gateway writes its client's messages to,
// and a function that releases it once the session is over. Standard
// output as a process inherits it is blocking, and a blocking write
// cannot take the gateway's raw path (gateway.StdioFile): a pipe is
// opened again through /proc/self/fd, non-blocking, as clientInput does.
// Anything else (a socket, whose mode the client shares; a terminal, a
// file), and any failure, is written as it is.
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
	}); cerr != nil || err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return w, func() {}
	}
	// O_NONBLOCK: without a reader (the client gone) the open fails
	// rather than waiting for one.
	nf, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return w, func() {}
	}
	return nf, func() { nf.Close() }
}

// clientStdio is a stdio gateway's client input and output, as ServeStdio
// takes them (never closed by it), and a function that releases them.
func clientStdio(r io.Reader, w io.Writer) (io.ReadCloser, io.WriteCloser, func()) {
	in, releaseIn := clientInput(r)
	out, releaseOut := clientOutput(w)
	var rc io.ReadCloser = io.NopCloser(in)
	if f, ok := in.(*os.File); ok {
		rc = gateway.StdioFile(f)
	}
	var wc io.WriteCloser = nopWriteCloser{out}
	if f, ok := out.(*os.File); ok {
		wc = gateway.StdioFile(f)
	}
	return rc, wc, func() { releaseOut(); releaseIn() }
}
