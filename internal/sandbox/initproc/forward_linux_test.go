package initproc

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first accepts with EMFILE, as a listener does
// while the process is out of file descriptors, then accepts conn, then
// is closed.
type failingListener struct {
	net.Listener
	fails int
	conn  net.Conn
}

func (l *failingListener) Accept() (net.Conn, error) {
	switch {
	case l.fails > 0:
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	case l.conn != nil:
		c := l.conn
		l.conn = nil
		return c, nil
	}
	return nil, net.ErrClosed
}

// TestAcceptLoopOutlivesEMFILE: a workload that floods its own egress
// forwarder until the init runs out of file descriptors must find it
// serving again once its connections close.
func TestAcceptLoopOutlivesEMFILE(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	ln := &failingListener{fails: 3, conn: a}
	handled := make(chan net.Conn, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		acceptLoop(ln, func(c net.Conn) { handled <- c })
	}()
	select {
	case c := <-handled:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the connection after three EMFILE accepts was never handled")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("acceptLoop did not return once its listener was closed")
	}
}
