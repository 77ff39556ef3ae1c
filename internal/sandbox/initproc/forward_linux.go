package initproc

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/egress/handover"
)

// The init serves proxyAddr on the sandbox's loopback, so programs use the
// proxy through the usual HTTP_PROXY variables, and each forward rule gets
// a listener of its own. It does not carry their bytes: it hands each
// accepted connection's descriptor to the proxy over the proxy socket
// (handover.Send), with the rule's fixed target for a forward, and
// closes its own copy; the proxy decides and relays from the workload's
// socket itself. The init takes no part after the accept.
//
// The listeners are raw blocking sockets, each accepting on a goroutine
// (and so a thread) of its own, not package net: net's cgo DNS resolver
// makes the binary dynamically linked, and loading libc costs every
// sandbox start about 1 ms of CPU. The init resolves no name.

// forwardSpec is one network.forward rule as the init sees it.
type forwardSpec struct {
	Listen string `json:"listen"` // loopback address inside the sandbox
	To     string `json:"to"`     // host:port the proxy connects to
}

// serveEgress starts the proxy listener, the forward listeners and, with
// transparent ports, the DNS socket and their listeners
// (transparent_linux.go). They live as long as the init does.
func serveEgress(forwards []forwardSpec, transparent []int) error {
	ln, err := listenTCP(proxyAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for the egress proxy: %w", proxyAddr, err)
	}
	go acceptLoop(acceptOn(ln), func(c int) { handOver(c, "") })
	for _, f := range forwards {
		fl, err := listenTCP(f.Listen)
		if err != nil {
			return fmt.Errorf("listening on %s for forward to %s: %w", f.Listen, f.To, err)
		}
		to := f.To
		go acceptLoop(acceptOn(fl), func(c int) { handOver(c, to) })
	}
	if len(transparent) > 0 {
		ts, err := listenTransparent(transparent)
		if err != nil {
			return fmt.Errorf("transparent egress: %w", err)
		}
		go ts.serve()
	}
	return nil
}

// listenBacklog is the listeners' backlog; the kernel caps it at
// net.core.somaxconn, as package net asks for.
const listenBacklog = 4096

// listenTCP returns a blocking, close-on-exec TCP socket listening on
// addr, an IP:PORT (the host accepts loopback addresses only; nothing is
// resolved), with SO_REUSEADDR as package net sets it.
func listenTCP(addr string) (int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return -1, err
	}
	ip := ap.Addr().Unmap()
	var sa unix.Sockaddr
	family := unix.AF_INET
	if ip.Is4() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}
	} else {
		if ip.Zone() != "" {
			return -1, fmt.Errorf("%s: a zone is not supported", addr)
		}
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if family == unix.AF_INET6 {
		// Only the address asked for, as package net listens on an IPv6 one.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// acceptOn returns the accept of listener fd: a blocking accept4 of a
// close-on-exec connection.
func acceptOn(fd int) func() (int, error) {
	return func() (int, error) {
		c, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
		return c, err
	}
}

// acceptRetry is the pause after a failed accept.
const acceptRetry = 50 * time.Millisecond

// acceptLoop serves accept until its listener is closed (EBADF, EINVAL).
// Other accept errors (EMFILE when the workload floods its own proxy,
// ENFILE, ENOBUFS) pass as connections end: quitting on them would leave
// the sandbox without egress for the rest of its life. Each connection
// is handled once a hand-over slot is free; until then the loop waits,
// and further connections wait in the listener's backlog, not in the
// init's threads.
func acceptLoop(accept func() (int, error), handle func(int)) {
	for {
		c, err := accept()
		switch err {
		case nil:
			handoverSlots <- struct{}{}
			go func() {
				defer func() { <-handoverSlots }()
				handle(c)
			}()
		case unix.EINTR, unix.ECONNABORTED:
		case unix.EBADF, unix.EINVAL, unix.ENOTSOCK:
			return
		default:
			time.Sleep(acceptRetry)
		}
	}
}

// maxHandovers bounds the hand-overs under way at once, over all of the
// init's listeners. Each one blocks a thread in connect(2) and sendmsg(2)
// to the proxy socket (up to handover.Timeout when the proxy is slow to
// accept), and the init's threads count against the sandbox's pids limit,
// which leaves the init only initTasks above the workload's own: a
// thread it cannot make is a fatal error of the Go runtime, the
// sandbox's end. A hand-over takes tens of microseconds, so four carry
// thousands of connections a second.
const maxHandovers = 4

// handoverSlots holds a token per hand-over under way.
var handoverSlots = make(chan struct{}, maxHandovers)

// handOver passes the accepted connection c to the proxy, with target for
// a forward, and closes it. If the proxy cannot be reached the workload
// sees its connection closed, as it would see a refusal. The caller holds
// a hand-over slot.
func handOver(c int, target string) {
	defer unix.Close(c)
	p, err := handover.Dial(proxySocket)
	if err != nil {
		return
	}
	defer unix.Close(p)
	_ = handover.Send(p, c, target)
}
