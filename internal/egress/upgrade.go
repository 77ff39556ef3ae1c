package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// isWebSocket reports whether r asks to switch to WebSocket (RFC 6455
// 4.1; HTTP/1.1 only: the intercepting server does not offer RFC 8441's
// extended CONNECT over HTTP/2).
func isWebSocket(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.Method == http.MethodGet &&
		strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket") &&
		hasToken(r.Header.Values("Connection"), "upgrade")
}

func hasToken(vv []string, token string) bool {
	for _, v := range vv {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// h1Transport returns the connection's HTTP/1.1-only transport, for
// requests that upgrade (an HTTP/2 upstream cannot switch protocols). It
// keeps no idle connections: a switched one is the handler's.
func (ic *interception) h1Transport() *http.Transport {
	ic.h1mu.Lock()
	defer ic.h1mu.Unlock()
	if ic.h1 == nil {
		ic.h1 = &http.Transport{
			DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return ic.dialTLSProtos(ctx, []string{"http/1.1"})
			},
			DisableKeepAlives:  true,
			DisableCompression: true,
		}
	}
	return ic.h1
}

func (ic *interception) closeH1() {
	ic.h1mu.Lock()
	defer ic.h1mu.Unlock()
	if ic.h1 != nil {
		ic.h1.CloseIdleConnections()
	}
}

// relayUpgraded answers the client's upgrade with resp (101) and relays
// the switched connection both ways, through the body the Injector's
// filter left, until either side ends; then both are closed. The
// session's limits hold: the upstream side keeps its deadlines and byte
// budget, and ending the session closes the client's connection.
func (ic *interception) relayUpgraded(w http.ResponseWriter, resp *http.Response) {
	up, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		ic.refuse(w, http.StatusBadGateway, "the switched connection cannot be relayed")
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		ic.refuse(w, http.StatusBadGateway, "cannot switch protocols on this connection")
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		ic.setReason("switching protocols: " + err.Error())
		return
	}
	defer conn.Close()
	// The server's read and write deadlines are no longer its business.
	conn.SetDeadline(time.Time{})
	h := resp.Header.Clone()
	removeHopHeaders(h)
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\n")
	h.Write(brw)
	brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		ic.setReason("switching protocols: " + err.Error())
		return
	}
	done := make(chan error, 2)
	go func() {
		// Bytes the client sent after its handshake first. Reads from the
		// client keep the session's idle and duration deadlines (read
		// timeouts leave a TLS connection usable): a relay stuck writing
		// to a client that no longer reads ends once nothing moves.
		cr := &sessConn{Conn: conn, s: ic.s}
		_, err := io.Copy(up, io.MultiReader(io.LimitReader(brw.Reader, int64(brw.Reader.Buffered())), cr))
		done <- err
	}()
	go func() {
		_, err := io.Copy(conn, up)
		done <- err
	}()
	err = <-done
	// Either side's end ends both: closing unblocks the other copy.
	conn.Close()
	up.Close()
	if err2 := <-done; err == nil {
		err = err2
	}
	switch {
	case isRefusal(err):
		ic.setReason(refusalText(err))
	case errors.Is(err, ErrIdle) || errors.Is(err, ErrMaxDuration):
		ic.setReason(err.Error())
	}
}
