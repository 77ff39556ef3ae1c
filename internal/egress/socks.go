package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928): no authentication, CONNECT only.
const (
	socksVersion    = 0x05
	socksNoAuth     = 0x00
	socksNoMethods  = 0xff
	socksCmdConnect = 0x01
	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04

	socksSucceeded          = 0x00
	socksGeneralFailure     = 0x01
	socksNotAllowed         = 0x02
	socksHostUnreachable    = 0x04
	socksConnRefused        = 0x05
	socksTTLExpired         = 0x06
	socksCmdNotSupported    = 0x07
	socksAddrTypeNotSupport = 0x08
)

func (s *session) serveSOCKS(cc net.Conn, br *bufio.Reader, hr *headerReader) {
	host, port, code, err := s.socksHandshake(cc, br)
	if err != nil {
		s.deny("SOCKS handshake: " + describeSOCKSErr(err, hr))
		if code != 0 {
			s.socksReply(code)
		}
		return
	}
	up, deny, err := s.dial(host, port)
	switch {
	case deny != "":
		s.socksReply(socksNotAllowed)
		return
	case err != nil:
		s.ev.Reason = err.Error()
		s.socksReply(socksDialCode(err))
		return
	}
	if err := s.socksReply(socksSucceeded); err != nil {
		s.ev.Reason = "writing SOCKS reply: " + err.Error()
		return
	}
	hr.lift()
	buffered, _ := br.Peek(br.Buffered())
	s.headerUntil = time.Time{}
	s.relay(cc, up, buffered)
}

// socksHandshake reads the greeting and request. On error, code is the
// reply to send (0: none, the client is not speaking SOCKS5 sensibly).
func (s *session) socksHandshake(cc net.Conn, br *bufio.Reader) (host string, port int, code byte, err error) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return "", 0, 0, err
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return "", 0, 0, err
	}
	if !containsByte(methods, socksNoAuth) {
		cc.Write([]byte{socksVersion, socksNoMethods})
		return "", 0, 0, errors.New("client offers no no-auth method")
	}
	if _, err := cc.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return "", 0, 0, err
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return "", 0, 0, err
	}
	if req[0] != socksVersion {
		return "", 0, socksGeneralFailure, errors.New("bad request version")
	}
	if req[1] != socksCmdConnect {
		return "", 0, socksCmdNotSupported, errors.New("command " + strconv.Itoa(int(req[1])) + " not supported")
	}
	switch req[3] {
	case socksAtypIPv4, socksAtypIPv6:
		b := make([]byte, 4)
		if req[3] == socksAtypIPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return "", 0, 0, err
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case socksAtypDomain:
		n, err := br.ReadByte()
		if err != nil {
			return "", 0, 0, err
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", 0, 0, err
		}
		host = string(b)
	default:
		return "", 0, socksAddrTypeNotSupport, errors.New("address type not supported")
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return "", 0, 0, err
	}
	return host, int(binary.BigEndian.Uint16(pb[:])), 0, nil
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// socksReply answers the request; the bound address is not disclosed.
func (s *session) socksReply(code byte) error {
	s.client.SetWriteDeadline(time.Now().Add(s.p.limits.HeaderTimeout))
	_, err := s.client.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	s.client.SetWriteDeadline(time.Time{})
	return err
}

func socksDialCode(err error) byte {
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return socksHostUnreachable
	case isTimeout(err), errors.Is(err, errContextDeadline):
		return socksTTLExpired
	case isConnRefused(err):
		return socksConnRefused
	}
	return socksGeneralFailure
}

func describeSOCKSErr(err error, hr *headerReader) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || hr.exceeded || isTimeout(err) {
		return describeReadErr(err, hr)
	}
	return err.Error()
}

var errContextDeadline = context.DeadlineExceeded

func isConnRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
