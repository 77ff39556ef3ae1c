package initproc

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/egress/handover"
)

// The init serves proxyAddr on the sandbox's loopback, so programs use the
// proxy through the usual HTTP_PROXY variables, each forward rule gets a
// listener of its own, and with transparent ports the DNS socket and
// their listeners (transparent_linux.go) join them. It does not carry
// their bytes: it hands each accepted connection's descriptor to the proxy
// over the proxy socket (handover.Send), with its target (a forward's
// fixed one, a transparent connection's name and port) and closes its own
// copy; the proxy decides and relays from the workload's socket itself.
// The init takes no part after the accept.
//
// One goroutine serves every listener and the DNS socket with poll(2),
// so they cost the init one thread however many forwards there are: its
// threads count against the sandbox's pids limit, which leaves it only
// initTasks above the workload's own. The sockets are raw, not package
// net: net's cgo DNS resolver makes the binary dynamically linked, and
// loading libc costs every sandbox start about 1 ms of CPU. The init
// resolves no name.

// forwardSpec is one network.forward rule as the init sees it.
type forwardSpec struct {
	Listen string `json:"listen"` // loopback address inside the sandbox
	To     string `json:"to"`     // host:port the proxy connects to
}

// serveEgress opens the proxy listener, the forward listeners and, with
// transparent ports, the DNS socket and their listeners, and serves them
// for as long as the init lives.
func serveEgress(forwards []forwardSpec, transparent []int) error {
	l, err := newEgressLoop()
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	if err := l.listen(proxyAddr, "", false); err != nil {
		return fmt.Errorf("listening on %s for the egress proxy: %w", proxyAddr, err)
	}
	for _, f := range forwards {
		if err := l.listen(f.Listen, f.To, false); err != nil {
			return fmt.Errorf("listening on %s for forward to %s: %w", f.Listen, f.To, err)
		}
	}
	if len(transparent) > 0 {
		dns, err := listenDNS()
		if err != nil {
			return fmt.Errorf("transparent egress: listening on 127.0.0.1:53 (udp): %w", err)
		}
		l.dns = dns
		for _, p := range transparent {
			addr := "0.0.0.0:" + strconv.Itoa(p)
			if err := l.listen(addr, "", true); err != nil {
				return fmt.Errorf("transparent egress: listening on %s: %w", addr, err)
			}
		}
	}
	go l.serve()
	return nil
}

// egressLoop is the init's egress: its listeners and DNS socket, served by
// one goroutine (serve), and the hand-overs under way.
type egressLoop struct {
	listeners []egressListener
	dns       int       // the DNS socket, -1 without transparent ports
	names     nameTable // the DNS's names; only serve's goroutine uses it
	next      int       // the listener the next accept pass begins with
	// slots holds a token per hand-over under way, at most maxHandovers.
	slots chan struct{}
	// wake, an eventfd, wakes serve when a slot frees while it waits for
	// one (waiting).
	wake    int
	waiting atomic.Bool
	// accept and handle are acceptConn and handOver but in tests.
	accept func(ln int) (int, error)
	handle func(c int, target string)
}

// newEgressLoop returns a loop without sockets.
func newEgressLoop() (*egressLoop, error) {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &egressLoop{dns: -1, wake: wake, slots: make(chan struct{}, maxHandovers), accept: acceptConn, handle: handOver}, nil
}

// egressListener is one listening socket of the loop.
type egressListener struct {
	fd          int
	target      string    // a forward's; "" for the proxy port
	transparent bool      // the target is the connection's name and port
	resting     time.Time // no accepts until then, after an accept error
}

// listen adds a non-blocking listener on addr.
func (l *egressLoop) listen(addr, target string, transparent bool) error {
	fd, err := listenTCP(addr)
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return err
	}
	l.listeners = append(l.listeners, egressListener{fd: fd, target: target, transparent: transparent})
	return nil
}

// acceptRetry is how long a listener rests after a failed accept (EMFILE
// when the workload floods its own proxy, ENFILE, ENOBUFS): it stays
// readable, and the loop would otherwise spin. Quitting instead would
// leave the sandbox without egress for the rest of its life.
const acceptRetry = 50 * time.Millisecond

// pollRecheck is how often serve looks again for the end of a listener's
// rest, in milliseconds.
const pollRecheck = 10

// serve answers DNS queries and accepts and hands over connections for as
// long as the init lives. A listener is left out of the poll while every
// hand-over slot is taken (its connections wait in its backlog; the
// hand-over that frees a slot wakes the loop) and while it rests after an
// accept error; the DNS socket is always in it. Each pass begins its
// accepts at the next listener, so none takes every free slot from the
// others.
func (l *egressLoop) serve() {
	buf := make([]byte, maxDNSMessage+1)
	fds := make([]unix.PollFd, 0, 2+len(l.listeners))
	idx := make([]int, 0, len(l.listeners)) // the listener of each pollfd after the first two
	for {
		now := time.Now()
		full := false
		if len(l.slots) == cap(l.slots) {
			// Announce the wait, then look again: a slot freed in
			// between would otherwise wake no one.
			l.waiting.Store(true)
			full = len(l.slots) == cap(l.slots)
		}
		fds, idx = fds[:0], idx[:0]
		fds = append(fds, unix.PollFd{Fd: int32(l.wake), Events: unix.POLLIN}, unix.PollFd{Fd: int32(l.dns), Events: unix.POLLIN})
		timeout := -1
		for k := range l.listeners {
			i := (l.next + k) % len(l.listeners)
			switch {
			case full:
			case now.Before(l.listeners[i].resting):
				timeout = pollRecheck
			default:
				fds = append(fds, unix.PollFd{Fd: int32(l.listeners[i].fd), Events: unix.POLLIN})
				idx = append(idx, i)
			}
		}
		l.next = (l.next + 1) % len(l.listeners)
		if _, err := unix.Poll(fds, timeout); err != nil {
			if err != unix.EINTR {
				time.Sleep(acceptRetry)
			}
			continue
		}
		for _, fd := range fds {
			if fd.Fd >= 0 && fd.Revents&unix.POLLNVAL != 0 {
				return // a socket was closed: only tests do that
			}
		}
		if fds[0].Revents != 0 {
			var n [8]byte
			_, _ = unix.Read(l.wake, n[:])
		}
		l.waiting.Store(false)
		if fds[1].Revents != 0 {
			answerDNS(l.dns, buf, &l.names)
		}
		for j, fd := range fds[2:] {
			if fd.Revents != 0 && !l.acceptOn(&l.listeners[idx[j]]) {
				l.listeners[idx[j]].resting = time.Now().Add(acceptRetry)
			}
		}
	}
}

// release gives back a hand-over's slot and wakes serve if it waits for
// one.
func (l *egressLoop) release() {
	<-l.slots
	if l.waiting.Load() {
		one := [8]byte{1}
		_, _ = unix.Write(l.wake, one[:])
	}
}

// acceptOn takes the connections waiting on ln while hand-over slots are
// free, up to a few per pass, and hands each over on a goroutine of its
// own; a transparent connection to an address no name has is closed. It
// returns false after an accept error other than an empty backlog.
func (l *egressLoop) acceptOn(ln *egressListener) bool {
	for range maxHandovers {
		select {
		case l.slots <- struct{}{}:
		default:
			return true // all taken: the rest wait in the backlog
		}
		c, err := l.accept(ln.fd)
		if err != nil {
			<-l.slots
			switch err {
			case unix.EINTR, unix.ECONNABORTED:
				continue
			case unix.EAGAIN:
				return true
			}
			return false
		}
		target := ln.target
		if ln.transparent {
			t, ok := transparentTarget(c, &l.names)
			if !ok {
				<-l.slots
				unix.Close(c)
				continue
			}
			target = t
		}
		go func() {
			defer l.release()
			l.handle(c, target)
		}()
	}
	return true
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

// acceptConn accepts a close-on-exec connection on listener fd.
func acceptConn(fd int) (int, error) {
	c, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
	return c, err
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
