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
	"net"
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

// sendTimeout bounds the write of one hand-over.
const sendTimeout = 10 * time.Second

// Send hands c to the proxy on p: the init's side of the hand-over.
// target is "" for the proxy port, or a forward's host:port. The caller
// closes c and p afterwards; the proxy holds its own descriptor.
func Send(p *net.UnixConn, c *net.TCPConn, target string) error {
	if len(Magic)+len(target)+1 >= MaxMessage || strings.ContainsAny(target, "\x00\r\n") {
		return fmt.Errorf("handing over a connection: invalid target %q", target)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var oob []byte
	if err := rc.Control(func(fd uintptr) { oob = unix.UnixRights(int(fd)) }); err != nil {
		return err
	}
	_ = p.SetWriteDeadline(time.Now().Add(sendTimeout))
	// While oob is in flight the kernel holds its own reference to the
	// socket: c may be closed as soon as this returns.
	_, _, err = p.WriteMsgUnix([]byte(Magic+target+"\n"), oob, nil)
	if err != nil {
		return fmt.Errorf("handing over a connection: %w", err)
	}
	return nil
}
