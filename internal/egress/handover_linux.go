package egress

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	send "mcpbox/internal/egress/handover"
)

// A sandbox's init does not relay its workload's connections: it passes
// each accepted TCP connection's descriptor over the proxy socket
// (SCM_RIGHTS), and the proxy serves that socket as the client itself, so
// the bytes go upstream → proxy → workload socket in one splice, the init
// out of the path.
//
// The proxy socket is reachable from inside the sandbox, so a hand-over
// is an attacker's message like any other: it is told apart by its first
// byte (0x00, which starts neither an HTTP request nor SOCKS), read in one
// bounded recvmsg under the request-head deadline in the connection's own
// goroutine, and refused unread (the connection closed, and with it the
// message and its descriptors) unless the unix socket's peer
// (SO_PEERCRED) is the sandbox's init (Options.HandoverPID), and refused
// (every descriptor it carried closed) unless it holds exactly one
// descriptor, and that is a
// connected TCP socket (AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_TCP, not
// listening). The socket then stands where the unix connection stood:
// the same request parsing, policy, limits, metering and log line follow.

// The message format is package handover's (imported as send), whose Send
// the init uses.
const (
	handoverMagic = send.Magic
	maxHandover   = send.MaxMessage
)

// maxHandoverFDs is the descriptors one recvmsg takes in; more than one is
// refused, and any beyond this room the kernel closes itself (MSG_CTRUNC).
const maxHandoverFDs = 8

// handover is a received hand-over.
type handover struct {
	conn   net.Conn // the workload's TCP connection
	target string   // "" or a forward's host:port
}

// takeHandover looks at the first byte of a unix client connection and,
// if it starts a hand-over, receives and checks it. ok is false (and
// nothing read) for any other connection; a refused hand-over returns
// ok with an error, its descriptors closed.
func (s *session) takeHandover(uc *net.UnixConn) (h handover, ok bool, err error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return h, false, nil
	}
	if err := uc.SetReadDeadline(s.headerUntil); err != nil {
		return h, false, nil
	}
	defer uc.SetReadDeadline(time.Time{})
	var first [1]byte
	var n int
	var serr error
	if err := rc.Read(func(fd uintptr) bool {
		// Without room for control data a peek installs no descriptor.
		n, _, serr = unix.Recvfrom(int(fd), first[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return serr != unix.EAGAIN
	}); err != nil || serr != nil || n != 1 || first[0] != handoverMagic[0] {
		return h, false, nil // the ordinary path reports it
	}
	// Only the init may hand over; the message of anyone else is refused
	// unread, so none of its descriptors enters this process.
	if pid := s.p.opts.HandoverPID; pid <= 0 {
		return h, true, errors.New("connection hand-over refused: hand-overs are not enabled")
	} else if cred, err := peerCred(rc); err != nil || int(cred.Pid) != pid {
		return h, true, errors.New("connection hand-over refused: not from the sandbox's init")
	}
	buf := make([]byte, maxHandover)
	oob := make([]byte, unix.CmsgSpace(maxHandoverFDs*4))
	var oobn, flags int
	if err := rc.Read(func(fd uintptr) bool {
		n, oobn, flags, _, serr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
		return serr != unix.EAGAIN
	}); err != nil {
		return h, true, fmt.Errorf("connection hand-over: %w", err)
	}
	fds, perr := rightsOf(oob[:oobn])
	if serr != nil {
		closeFDs(fds)
		return h, true, fmt.Errorf("connection hand-over: %w", serr)
	}
	switch {
	case perr != nil:
		err = perr
	case flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0:
		err = errors.New("too much control data")
	case len(fds) != 1:
		err = fmt.Errorf("%d descriptors, want 1", len(fds))
	case n == maxHandover || n < len(handoverMagic)+1 || string(buf[:len(handoverMagic)]) != handoverMagic || buf[n-1] != '\n':
		err = errors.New("malformed message")
	case bytes.ContainsAny(buf[len(handoverMagic):n-1], "\x00\r\n"):
		err = errors.New("malformed target")
	}
	if err == nil {
		err = checkTCPSocket(fds[0])
	}
	if err != nil {
		closeFDs(fds)
		return h, true, fmt.Errorf("connection hand-over refused: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "handed-over")
	c, err := net.FileConn(f) // a dup of its own
	f.Close()
	if err != nil {
		return h, true, fmt.Errorf("connection hand-over refused: %w", err)
	}
	if _, isTCP := c.(*net.TCPConn); !isTCP {
		c.Close()
		return h, true, errors.New("connection hand-over refused: not a TCP connection")
	}
	return handover{conn: c, target: string(buf[len(handoverMagic) : n-1])}, true, nil
}

// peerCred returns the credentials of the process that connected the
// unix socket, as of its connect(2): a workload cannot borrow the init's.
func peerCred(rc interface {
	Control(func(fd uintptr)) error
}) (*unix.Ucred, error) {
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// rightsOf returns every descriptor in the control messages of oob,
// including those of a message it then rejects.
func rightsOf(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, errors.New("malformed control data")
	}
	var fds []int
	var bad error
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_RIGHTS {
			bad = errors.New("unexpected control message")
			continue
		}
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			bad = errors.New("malformed descriptors")
			continue
		}
		fds = append(fds, got...)
	}
	return fds, bad
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// checkTCPSocket accepts only a connected TCP socket of IPv4 or IPv6:
// nothing else (a unix socket, a listener, a file, a pipe) may stand in
// for a client connection.
func checkTCPSocket(fd int) error {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return errors.New("not a socket")
	}
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return err
	}
	proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil {
		return err
	}
	listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return err
	}
	switch {
	case dom != unix.AF_INET && dom != unix.AF_INET6:
		return fmt.Errorf("socket domain %d, want AF_INET or AF_INET6", dom)
	case typ != unix.SOCK_STREAM || proto != unix.IPPROTO_TCP:
		return fmt.Errorf("socket type %d protocol %d, want TCP", typ, proto)
	case listening != 0:
		return errors.New("a listening socket")
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return errors.New("an unconnected socket")
	}
	return nil
}
