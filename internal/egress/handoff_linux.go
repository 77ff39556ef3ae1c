package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// handoffByte, sent with one file descriptor (SCM_RIGHTS) as the first
// byte on the unix socket, hands the proxy a connection to serve in place
// of the unix one. No HTTP request or SOCKS greeting starts with it.
const handoffByte = 0x00

// HandOff passes c to the proxy listening on the unix socket at sock as a
// file descriptor, so that the proxy reads and writes c itself: the
// sandbox's init then carries no bytes, and the proxy can splice c to the
// upstream. c stays open here; the caller closes its copy.
func HandOff(sock string, c *net.TCPConn, timeout time.Duration) error {
	pc, err := net.DialTimeout("unix", sock, timeout)
	if err != nil {
		return fmt.Errorf("dialing the egress proxy: %w", err)
	}
	defer pc.Close()
	p := pc.(*net.UnixConn)
	_ = p.SetWriteDeadline(time.Now().Add(timeout))
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("handing the connection to the egress proxy: %w", err)
	}
	var werr error
	if err := rc.Control(func(fd uintptr) {
		_, _, werr = p.WriteMsgUnix([]byte{handoffByte}, unix.UnixRights(int(fd)), nil)
	}); err != nil {
		return fmt.Errorf("handing the connection to the egress proxy: %w", err)
	}
	if werr != nil {
		return fmt.Errorf("handing the connection to the egress proxy: %w", werr)
	}
	return nil
}

// takeHandoff reads the first byte of a unix-socket client. When it is
// handoffByte with one connected TCP socket attached, that socket becomes
// the session's client (see HandOff). Any other descriptor is closed
// unused, and any other byte is returned, the first of the request. A
// read error returns nothing: the request parser meets it again.
//
// A handed-over socket gives the client nothing it could not have by
// speaking on the unix socket itself: the proxy only reads, writes and
// closes it, under the same decisions and limits.
func (s *session) takeHandoff(uc *net.UnixConn) []byte {
	_ = uc.SetReadDeadline(s.headerUntil)
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, _ := uc.ReadMsgUnix(b[:], oob)
	fds := receivedFDs(oob[:oobn])
	if n == 0 {
		closeFDs(fds)
		return nil
	}
	if b[0] != handoffByte || len(fds) != 1 {
		closeFDs(fds)
		return b[:n]
	}
	c, err := adoptTCP(fds[0])
	if err != nil {
		return b[:n] // the NUL byte: the parser refuses the request
	}
	s.mu.Lock()
	closed := s.closed
	s.client = c
	s.mu.Unlock()
	uc.Close()
	if closed {
		c.Close()
	}
	return nil
}

// receivedFDs returns the descriptors in SCM_RIGHTS messages of oob.
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// adoptTCP turns fd into a connection if it is a connected TCP socket,
// and closes it either way.
func adoptTCP(fd int) (*net.TCPConn, error) {
	f := os.NewFile(uintptr(fd), "handed-over")
	defer f.Close()
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 0 {
		return nil, errors.New("not a connected socket")
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, errors.New("not a TCP socket")
	}
	return tc, nil
}
