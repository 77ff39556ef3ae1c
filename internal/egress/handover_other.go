//go:build !linux

package egress

import "net"

// handover is a received connection hand-over (Linux only).
type handover struct {
	conn   net.Conn
	target string
}

// takeHandover: descriptors are handed over on Linux only.
func (s *session) takeHandover(uc *net.UnixConn) (h handover, ok bool, err error) {
	return h, false, nil
}
