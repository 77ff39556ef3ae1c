package egress

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Authorize picks, from a request's proxy credentials, the proxy of the
// client that sent them (see Options.Authorize).
type Authorize func(user, password string, from net.Addr) (*Proxy, error)

// errNoCredentials is why a request without Basic proxy credentials is
// refused.
var errNoCredentials = errors.New("no proxy credentials (Proxy-Authorization: Basic)")

// authorize runs Options.Authorize for req and hands the session to the
// proxy it names. On refusal it answers 407 (credentials) or 403 (that
// proxy's connection limit) and returns false.
func (s *session) authorize(req *http.Request) bool {
	user, pass, ok := proxyBasic(req.Header.Get("Proxy-Authorization"))
	req.Header.Del("Proxy-Authorization")
	var sel *Proxy
	err := errNoCredentials
	if ok {
		sel, err = s.p.opts.Authorize(user, pass, s.client.RemoteAddr())
		if err == nil && sel == nil {
			err = errors.New("no proxy for these credentials")
		}
	}
	if err != nil {
		s.targetOf(req)
		s.deny("proxy authorization: " + err.Error())
		s.writeErrorHeader(http.StatusProxyAuthRequired, "Proxy-Authenticate: Basic realm=\"mcpbox\"\r\n", s.ev.Reason)
		return false
	}
	if reason := sel.adopt(s); reason != "" {
		s.targetOf(req)
		s.deny(reason)
		s.writeError(http.StatusForbidden, reason)
		return false
	}
	return true
}

// targetOf fills the event's target from a request that is refused
// before its target is checked, for the log.
func (s *session) targetOf(req *http.Request) {
	hp := req.Host
	if req.Method != http.MethodConnect && req.URL != nil {
		hp = req.URL.Host
	}
	if host, port, err := splitHostPort(hp, 80); err == nil {
		s.ev.Host, s.ev.Port = printableHost(host), port
	} else {
		s.ev.Host = printableHost(hp)
	}
}

// proxyBasic parses a Proxy-Authorization header of the Basic scheme.
func proxyBasic(h string) (user, pass string, ok bool) {
	scheme, rest, found := strings.Cut(strings.TrimSpace(h), " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// adopt makes p the proxy of session s, which another proxy (the front
// with Options.Authorize) accepted: p's policy, limits, resolver,
// injector and log decide and carry the connection, it counts against
// p's MaxConns and byte totals, and p.Close ends it. It returns a reason
// to refuse, or "".
func (p *Proxy) adopt(s *session) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "the client's proxy is closed"
	}
	if max := p.limits.MaxConns; max > 0 && p.active.Load() >= int64(max) {
		return fmt.Sprintf("connection limit (%d) reached", max)
	}
	p.sessions[s] = struct{}{}
	p.active.Add(1)
	p.wg.Add(1)
	s.p = p
	s.ev.SandboxID = p.opts.SandboxID
	return ""
}

// release ends p's hold on an adopted session, after its event is
// logged.
func (p *Proxy) release(s *session) {
	p.mu.Lock()
	delete(p.sessions, s)
	p.mu.Unlock()
	p.active.Add(-1)
	p.wg.Done()
}
