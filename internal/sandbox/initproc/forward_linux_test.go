package initproc

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptLoopOutlivesEMFILE: a workload that floods its own egress
// forwarder until the init runs out of file descriptors must find it
// serving again once its connections close.
func TestAcceptLoopOutlivesEMFILE(t *testing.T) {
	fails := 3
	served := false
	accept := func() (int, error) { // EMFILE thrice, then a connection, then closed
		switch {
		case fails > 0:
			fails--
			return -1, unix.EMFILE
		case !served:
			served = true
			return 42, nil
		}
		return -1, unix.EBADF
	}
	handled := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		acceptLoop(accept, func(c int) { handled <- c })
	}()
	select {
	case c := <-handled:
		if c != 42 {
			t.Fatalf("handled %d, want the accepted 42", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection after three EMFILE accepts was never handled")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("acceptLoop did not return once its listener was closed")
	}
}

// TestListenTCP: the listener takes a loopback IP:PORT of either family,
// accepts connections made to it, and refuses a name (the init resolves
// nothing).
func TestListenTCP(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		fd, err := listenTCP(addr)
		if err != nil {
			if addr == "[::1]:0" {
				t.Logf("%s: %v (no IPv6 loopback here?)", addr, err)
				continue
			}
			t.Fatalf("listenTCP(%s): %v", addr, err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		c, err := unix.Socket(map[bool]int{true: unix.AF_INET, false: unix.AF_INET6}[addr[0] != '['], unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Connect(c, sa); err != nil {
			t.Fatalf("connecting to the %s listener: %v", addr, err)
		}
		a, err := acceptOn(fd)()
		if err != nil {
			t.Fatalf("accepting on the %s listener: %v", addr, err)
		}
		unix.Close(a)
		unix.Close(c)
		unix.Close(fd)
	}
	if fd, err := listenTCP("localhost:5432"); err == nil {
		unix.Close(fd)
		t.Error("listenTCP resolved a name")
	}
}
