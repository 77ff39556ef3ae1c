package initproc

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEgressLoopOutlivesEMFILE: a workload that floods its own egress
// listeners until the init runs out of file descriptors must find them
// serving again once its connections close, and the loop must not spin
// meanwhile (a listener with a connection waiting stays readable).
func TestEgressLoopOutlivesEMFILE(t *testing.T) {
	l, err := newEgressLoop()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.listen("127.0.0.1:0", "db:5432", false); err != nil {
		t.Fatal(err)
	}
	ln := l.listeners[0].fd
	var accepts atomic.Int32
	l.accept = func(fd int) (int, error) { // EMFILE thrice, then the real accept
		if accepts.Add(1) <= 3 {
			return -1, unix.EMFILE
		}
		return acceptConn(fd)
	}
	type handed struct {
		c      int
		target string
	}
	handled := make(chan handed, 1)
	l.handle = func(c int, target string) {
		unix.Close(c)
		handled <- handed{c, target}
	}
	start := time.Now()
	stop := runLoop(t, l)
	dialListener(t, ln)
	select {
	case h := <-handled:
		if h.target != "db:5432" {
			t.Fatalf("handed over with target %q, want the forward's", h.target)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection after three EMFILE accepts was never handled")
	}
	// Three rests of acceptRetry, and no accept between them (a fifth
	// finds the backlog empty).
	if d, n := time.Since(start), accepts.Load(); d < 3*acceptRetry || n > 5 {
		t.Errorf("handled after %v and %d accepts, want at least %v and at most 5 (no spinning)", d, n, 3*acceptRetry)
	}
	stop()
}

// dialListener connects to the IPv4 listener ln; the connection closes
// when the test ends.
func dialListener(t *testing.T, ln int) {
	t.Helper()
	sa, err := unix.Getsockname(ln)
	if err != nil {
		t.Fatal(err)
	}
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(c) })
	if err := unix.Connect(c, sa); err != nil {
		t.Fatal(err)
	}
}

// runLoop serves l on a goroutine, with a pipe in the DNS socket's place
// to wake it; stop closes l's listeners and waits for serve to return.
func runLoop(t *testing.T, l *egressLoop) (stop func()) {
	t.Helper()
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	l.dns = wake[0]
	var listeners []int // read before serve runs: it writes l.listeners
	for _, ln := range l.listeners {
		listeners = append(listeners, ln.fd)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.serve()
	}()
	return func() {
		for _, fd := range listeners {
			unix.Close(fd)
		}
		unix.Write(wake[1], []byte{0}) // the next poll finds them closed
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the loop did not return once its listeners were closed")
		}
		unix.Close(wake[0])
		unix.Close(wake[1])
		unix.Close(l.wake)
	}
}

// TestEgressLoopSlots: with every hand-over slot taken, a waiting
// connection stays in the backlog, and is handed over as soon as a slot
// frees.
func TestEgressLoopSlots(t *testing.T) {
	l, err := newEgressLoop()
	if err != nil {
		t.Fatal(err)
	}
	for range maxHandovers {
		l.slots <- struct{}{}
	}
	if err := l.listen("127.0.0.1:0", "", false); err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{}, 1)
	l.handle = func(c int, _ string) {
		unix.Close(c)
		handled <- struct{}{}
	}
	ln := l.listeners[0].fd // read before serve runs: it writes l.listeners
	defer runLoop(t, l)()
	dialListener(t, ln)
	select {
	case <-handled:
		t.Fatal("handed over with every slot taken")
	case <-time.After(100 * time.Millisecond):
	}
	// A slot freed as a hand-over frees it wakes the loop at once.
	freed := time.Now()
	l.release()
	select {
	case <-handled:
	case <-time.After(5 * time.Second):
		t.Fatal("not handed over once a slot was free")
	}
	if d := time.Since(freed); d > time.Second {
		t.Errorf("handed over %v after a slot freed", d)
	}
	for range maxHandovers - 1 {
		l.release()
	}
	// The hand-over's own slot is given back after handle returns.
	for deadline := time.Now().Add(5 * time.Second); len(l.slots) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots still taken", len(l.slots))
		}
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
		a, err := acceptConn(fd)
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
