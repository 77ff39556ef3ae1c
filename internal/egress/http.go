package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveHTTP handles a CONNECT or absolute-form HTTP request.
func (s *session) serveHTTP(cc net.Conn, br *bufio.Reader, hr *headerReader) {
	req, err := http.ReadRequest(br)
	if err != nil {
		code := http.StatusBadRequest
		switch {
		case hr.exceeded:
			code = http.StatusRequestHeaderFieldsTooLarge
		case isTimeout(err):
			code = http.StatusRequestTimeout
		}
		reason := "malformed request"
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || hr.exceeded || isTimeout(err) {
			reason = describeReadErr(err, hr)
		}
		s.deny(reason)
		s.writeError(code, reason)
		return
	}
	hr.lift()
	if req.Method == http.MethodConnect {
		s.ev.Kind = "connect" // before authorize, so a refusal logs it too
	}
	front := s.p
	if s.p.opts.Authorize != nil && !s.authorize(req) {
		return
	}
	if req.Method == http.MethodConnect && front.opts.RenewTarget != "" && req.Host == front.opts.RenewTarget {
		// A credential presented, no connection asked for.
		s.renewal = true
		s.client.SetWriteDeadline(time.Now().Add(s.p.limits.HeaderTimeout))
		io.WriteString(s.client, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
		return
	}
	if req.Method == http.MethodConnect {
		s.serveConnect(cc, br, req)
		return
	}
	s.servePlain(cc, req)
}

// dialHTTP dials host:port for an HTTP client and answers 403 or 502
// itself when that fails; nil means the session is over.
func (s *session) dialHTTP(host string, port int) net.Conn {
	up, deny, err := s.dial(host, port)
	switch {
	case deny != "":
		s.writeRefusal(s.ev.Reason)
	case err != nil:
		s.ev.Reason = err.Error()
		s.writeError(http.StatusBadGateway, err.Error())
	}
	return up
}

func (s *session) serveConnect(cc net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := splitHostPort(req.Host, 0)
	if err != nil {
		s.ev.Host = printableHost(req.Host)
		s.deny("CONNECT target: " + err.Error())
		s.writeError(http.StatusBadRequest, s.ev.Reason)
		return
	}
	up := s.dialHTTP(host, port)
	if up == nil {
		return
	}
	if _, err := io.WriteString(cc, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		s.ev.Reason = "writing CONNECT reply: " + err.Error()
		return
	}
	buffered, _ := br.Peek(br.Buffered())
	s.headerUntil = time.Time{}
	if inj := s.p.opts.Injector; inj != nil && s.ev.Kind == "connect" && inj.Intercepts(s.ev.Host, port) {
		s.intercept(up, bytes.Clone(buffered), s.ev.Host, port)
		return
	}
	s.relay(cc, up, buffered)
}

// serveForward serves a handed-over forward connection (handover_linux.go)
// as a CONNECT to target: the same decision, dial, log and relay, but no
// reply on the connection, whose peer speaks the target's protocol. A
// refusal or failed dial just closes it, as the init's CONNECT did.
func (s *session) serveForward(cc net.Conn, target string) {
	s.ev.Kind = "connect"
	s.quiet = true
	host, port, err := splitHostPort(target, 0)
	if err != nil {
		s.ev.Host = printableHost(target)
		s.deny("CONNECT target: " + err.Error())
		return
	}
	up := s.dialHTTP(host, port)
	if up == nil {
		return
	}
	s.headerUntil = time.Time{}
	if inj := s.p.opts.Injector; inj != nil && s.ev.Kind == "connect" && inj.Intercepts(s.ev.Host, port) {
		s.intercept(up, nil, s.ev.Host, port)
		return
	}
	s.relay(cc, up, nil)
}

// hopHeaders are connection-specific (RFC 9110 7.6.1) and not forwarded.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// servePlain forwards one absolute-form request in origin form and its
// response, then closes (Connection: close both ways).
func (s *session) servePlain(cc net.Conn, req *http.Request) {
	s.ev.Host = printableHost(req.URL.Host)
	if !req.URL.IsAbs() || req.URL.Host == "" {
		s.deny("not a proxy request: want an absolute http:// URL or CONNECT")
		s.writeError(http.StatusBadRequest, s.ev.Reason)
		return
	}
	if req.URL.Scheme != "http" {
		s.deny("scheme " + req.URL.Scheme + " unsupported: use CONNECT for https")
		s.writeError(http.StatusBadRequest, s.ev.Reason)
		return
	}
	host, port, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		s.deny("request URL: " + err.Error())
		s.writeError(http.StatusBadRequest, s.ev.Reason)
		return
	}
	up := s.dialHTTP(host, port)
	if up == nil {
		return
	}
	s.ev.Package, s.ev.Version = packageOf(s.ev.Host, req.URL.Path)
	s.headerUntil = time.Time{}
	if inj := s.p.opts.Injector; inj != nil {
		if _, err := inj.Request(req, Target{Host: s.ev.Host, Port: port}); err != nil {
			s.ev.Reason = printable(err.Error(), 512)
			s.writeError(http.StatusForbidden, s.ev.Reason)
			return
		}
	}
	if err := s.roundTrip(cc, &sessConn{Conn: up, s: s, upstream: true}, req); err != nil {
		s.noteEnd(err)
		if s.ev.Reason == "" {
			s.ev.Reason = err.Error()
		}
	}
}

func (s *session) roundTrip(cc, uc net.Conn, req *http.Request) error {
	removeHopHeaders(req.Header)
	req.Host = req.URL.Host // the Host header must name the target dialed
	req.RequestURI = ""
	req.Close = true
	if err := req.Write(uc); err != nil {
		if isRefusal(err) {
			s.writeError(http.StatusForbidden, refusalText(err))
			s.ev.Reason = printable(refusalText(err), 512)
			return err
		}
		s.writeError(http.StatusBadGateway, "sending request upstream failed")
		return fmt.Errorf("forwarding request: %w", err)
	}
	ubr := bufio.NewReader(uc)
	for {
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			s.writeError(http.StatusBadGateway, "reading upstream response failed")
			return fmt.Errorf("reading response: %w", err)
		}
		interim := resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols
		removeHopHeaders(resp.Header)
		resp.Close = !interim
		var w io.Writer = cc
		if uc, ok := uc.(*sessConn); ok && !interim {
			w = s.responseWriter(cc, uc, ubr, resp)
		}
		err = resp.Write(w)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("writing response: %w", err)
		}
		if !interim {
			return nil
		}
	}
}

// splitHostPort splits an authority; defPort (if non-zero) applies
// when it has no port.
func splitHostPort(hostport string, defPort int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if defPort == 0 || !strings.Contains(err.Error(), "missing port") {
			return "", 0, fmt.Errorf("invalid host:port %q", hostport)
		}
		return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defPort, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port in %q", hostport)
	}
	return host, port, nil
}

// writeError answers an HTTP client with a short text reason and closes.
func (s *session) writeError(code int, reason string) { s.writeErrorHeader(code, "", reason) }

// RefusedHeader names the kind of an egress policy refusal (refusalCode)
// in the proxy's 403, beside the reason in its status line and body: a
// CONNECT client (any HTTPS one) rarely shows a refused tunnel's body,
// but most show its status line or let it be read.
const RefusedHeader = "X-Mcpbox-Refused"

// writeRefusal answers a target the policy refuses: 403 with the reason
// (already printable: session.deny) in the status line, the body and,
// as its kind, RefusedHeader. The reason names the target as the policy
// read it, never anything the client sent verbatim beyond that, and no
// secret: the policy holds none.
func (s *session) writeRefusal(reason string) {
	reason = printable(reason, 512) // no CR, LF or other control byte reaches the head
	s.writeErrorStatus(http.StatusForbidden, "Forbidden (mcpbox egress: "+reason+")",
		RefusedHeader+": "+refusalCode(reason)+"\r\n", reason)
}

// writeErrorHeader is writeError with extra header lines (each ending in
// CRLF).
func (s *session) writeErrorHeader(code int, extra, reason string) {
	s.writeErrorStatus(code, http.StatusText(code), extra, reason)
}

// writeErrorStatus is writeErrorHeader with the status line's reason
// phrase, which must be printable ASCII.
func (s *session) writeErrorStatus(code int, phrase, extra, reason string) {
	if s.quiet {
		return
	}
	body := "mcpbox egress: " + reason + "\n"
	msg := fmt.Sprintf("HTTP/1.1 %d %s\r\n%sContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", code, phrase, extra, len(body), body)
	s.client.SetWriteDeadline(time.Now().Add(s.p.limits.HeaderTimeout))
	io.WriteString(s.client, msg)
}
