package initproc

import (
	"errors"
	"fmt"
	"net"
	"time"

	"mcpbox/internal/egress/handover"
)

// The init serves proxyAddr on the sandbox's loopback, so programs use the
// proxy through the usual HTTP_PROXY variables, and each forward rule gets
// a listener of its own. It does not carry their bytes: it hands each
// accepted connection's descriptor to the proxy over the proxy socket
// (handover.Send), with the rule's fixed target for a forward, and
// closes its own copy; the proxy decides and relays from the workload's
// socket itself. The init takes no part after the accept.

// forwardSpec is one network.forward rule as the init sees it.
type forwardSpec struct {
	Listen string `json:"listen"` // loopback address inside the sandbox
	To     string `json:"to"`     // host:port the proxy connects to
}

// serveEgress starts the proxy listener and the forward listeners. They
// live as long as the init does.
func serveEgress(forwards []forwardSpec) error {
	ln, err := net.Listen("tcp", proxyAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for the egress proxy: %w", proxyAddr, err)
	}
	go acceptLoop(ln, func(c net.Conn) { handOver(c, "") })
	for _, f := range forwards {
		fl, err := net.Listen("tcp", f.Listen)
		if err != nil {
			return fmt.Errorf("listening on %s for forward to %s: %w", f.Listen, f.To, err)
		}
		to := f.To
		go acceptLoop(fl, func(c net.Conn) { handOver(c, to) })
	}
	return nil
}

// acceptRetry is the pause after a failed accept.
const acceptRetry = 50 * time.Millisecond

// acceptLoop serves ln until it is closed. Other accept errors (EMFILE
// when the workload floods its own proxy, ENFILE, ENOBUFS) pass as
// connections end: quitting on them would leave the sandbox without
// egress for the rest of its life.
func acceptLoop(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(acceptRetry)
			continue
		}
		go handle(c)
	}
}

// handOver passes c to the proxy, with target for a forward, and closes
// it. If the proxy cannot be reached the workload sees its connection
// closed, as it would see a refusal.
func handOver(c net.Conn, target string) {
	defer c.Close()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	p, err := net.DialTimeout("unix", proxySocket, 10*time.Second)
	if err != nil {
		return
	}
	defer p.Close()
	_ = handover.Send(p.(*net.UnixConn), tc, target)
}
