// Package handover is the sending side of a connection hand-over: the
// sandbox init passes each connection it accepts on the sandbox's loopback
// to the egress proxy over the proxy socket (SCM_RIGHTS), and the proxy
// (internal/egress, takeHandover) serves the socket itself.
//
// It lives apart from internal/egress so that the lean sandbox init
// (cmd/mcpbox-init) does not link the proxy's packages (net/http,
// crypto/tls, x509): Go runs every linked package's initializers at each
// sandbox start. The message format is shared: internal/egress's tests
// check that both sides agree.
package handover

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Magic starts a hand-over message: Magic TARGET "\n", where TARGET is
// empty for the proxy port or the host:port of a forward. Its first byte,
// 0x00, starts neither an HTTP request nor SOCKS.
const Magic = "\x00FD1 "

// MaxMessage bounds a hand-over message: the magic, a host:port and the
// newline. The proxy refuses a message of this length or more.
const MaxMessage = 512

// Timeout bounds the connection to the proxy socket and the write of one
// hand-over (SO_SNDTIMEO, which bounds a unix socket's connect too).
const Timeout = 10 * time.Second

// Dial connects a blocking unix stream socket to the proxy socket at
// path, its connect and sends bounded by Timeout. The caller closes it.
func Dial(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	tv := unix.NsecToTimeval(Timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connecting to %s: %w", path, err)
	}
	return fd, nil
}

// Send hands the TCP connection conn to the proxy on p, a unix socket
// connected to the proxy socket (Dial): the init's side of the
// hand-over. target is "" for the proxy port, or a forward's host:port.
// The caller closes conn and p afterwards; the proxy holds its own
// descriptor. Descriptors, not net.Conns: the init links no net package
// (its cgo resolver makes every start load libc).
func Send(p, conn int, target string) error {
	if len(Magic)+len(target)+1 >= MaxMessage || strings.ContainsAny(target, "\x00\r\n") {
		return fmt.Errorf("handing over a connection: invalid target %q", target)
	}
	// While the descriptor is in flight the kernel holds its own
	// reference to the socket: conn may be closed as soon as this returns.
	msg := []byte(Magic + target + "\n")
	for {
		n, err := unix.SendmsgN(p, msg, unix.UnixRights(conn), nil, unix.MSG_NOSIGNAL)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("handing over a connection: %w", err)
		case n != len(msg):
			return fmt.Errorf("handing over a connection: sent %d of %d bytes", n, len(msg))
		}
		return nil
	}
}
