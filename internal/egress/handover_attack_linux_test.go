package egress

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHandOverBlockingSocketAttack is the workload's own hand-over of a
// socket it keeps a copy of: the proxy's descriptor shares the open file
// description with the workload's, so the workload clears O_NONBLOCK under
// the proxy, whose reads then block in read(2) where no deadline reaches
// them: the request-head timeout never fires, the session holds its
// MaxConns slot and an OS thread, and Close waits for the read forever.
// Handing over both ends of a connection keeps them so after the sandbox
// dies. Only the init, whose accepted sockets no workload holds, may hand
// connections over.
func TestHandOverBlockingSocketAttack(t *testing.T) {
	ev := newEvents()
	p, sock := startProxy(t, Options{
		SandboxID:   "sb1",
		HandoverPID: os.Getppid(), // the init: not this process
		Rules:       []Rule{{Host: "127.0.0.1", Ports: []int{1}}},
		Limits:      Limits{HeaderTimeout: time.Second},
		Log:         ev.log,
	})
	d, a := tcpPair(t) // both ends the workload's own
	// The proxy would block reading a until d writes; the test's cleanup
	// closes d, which ends that read even before the fix.
	u := dialUnix(t, sock)
	if err := SendConn(u.(*net.UnixConn), a, ""); err != nil {
		t.Fatal(err)
	}
	rc, err := a.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// Clear O_NONBLOCK on the shared description for a while, past the
	// proxy's net.FileConn, which sets it.
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		rc.Control(func(fd uintptr) {
			fl, _ := unix.FcntlInt(fd, unix.F_GETFL, 0)
			unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_NONBLOCK)
		})
	}
	// One byte wakes the proxy's poller; its next read(2) blocks.
	if _, err := d.Write([]byte("G")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Second)
	for p.ActiveConns() != 0 {
		if time.Now().After(deadline) {
			d.Close() // lets the blocked read return
			t.Fatalf("a handed-over socket the workload made blocking holds its session past its 1s head timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e := ev.next(t); e.Decision != "deny" || !strings.Contains(e.Reason, "not from the sandbox's init") {
		t.Errorf("event = %+v, want the hand-over refused", e)
	}
}
