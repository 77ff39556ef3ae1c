package egress

import (
	"fmt"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	send "mcpbox/internal/egress/handover"
)

// SendConn hands c to the proxy on p as the sandbox init does, with
// package handover's Send.
func SendConn(p *net.UnixConn, c *net.TCPConn, target string) error {
	fd := func(sc interface {
		SyscallConn() (syscall.RawConn, error)
	}) (int, error) {
		rc, err := sc.SyscallConn()
		if err != nil {
			return -1, err
		}
		n := -1
		if err := rc.Control(func(f uintptr) { n = int(f) }); err != nil {
			return -1, err
		}
		return n, nil
	}
	pfd, err := fd(p)
	if err != nil {
		return err
	}
	cfd, err := fd(c)
	if err != nil {
		return err
	}
	return send.Send(pfd, cfd, target)
}

// A connection sent with handover.Send over its own Dial is served, and
// a target the receiver would refuse is not sent.
func TestHandoverSendAccepted(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	target := fmt.Sprintf("db.internal:%d", port)
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Forwards: []Forward{{Listen: "127.0.0.1:5432", To: target}},
		Resolver: newResolver(map[string][]string{"db.internal": {"127.0.0.1"}}),
		Log:      ev.log,
	})
	d, a := tcpPair(t)
	p, err := send.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := send.Send(p, connFD(t, a), target); err != nil {
		t.Fatal(err)
	}
	a.Close()
	unix.Close(p)
	echoOnce(t, d, "select 1")
	d.Close()
	if e := ev.next(t); e.Kind != "forward" || e.Decision != "allow" {
		t.Errorf("event = %+v, want an allowed forward", e)
	}
	if err := send.Send(-1, -1, "x\ny"); err == nil {
		t.Error("handover.Send sent a target with a newline")
	}
}

// connFD returns c's descriptor, valid while c is open.
func connFD(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		t.Fatal(err)
	}
	return fd
}
