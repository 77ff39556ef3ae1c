//go:build !linux

package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// spliceRelay needs splice(2); elsewhere relay copies.
func (s *session) spliceRelay(client, up net.Conn, buffered []byte) bool { return false }

// responseWriter: without splice, the response is copied to cc.
func (s *session) responseWriter(cc net.Conn, uc *sessConn, ubr *bufio.Reader, resp *http.Response) io.Writer {
	return cc
}
