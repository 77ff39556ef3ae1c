//go:build !linux

package egress

import "net"

// spliceRelay needs splice(2); elsewhere relay copies.
func (s *session) spliceRelay(client, up net.Conn, buffered []byte) bool { return false }
