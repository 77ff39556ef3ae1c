package podagent

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ProxyRenewTarget is the CONNECT target by which the agent presents a
// renewed token to the egress proxy (egress.Options.RenewTarget): never
// dialed, answered 204, not logged. A name under .invalid, which no DNS
// resolves, so that no proxy would ever reach it.
const ProxyRenewTarget = "mcpbox-token-renewal.invalid:1"

// Proxy is the egress proxy the agent fronts for its server (the gateway's
// shared proxy of the Kubernetes backend): the server gets proxy
// variables naming the agent's own loopback listener, never the token,
// and the agent adds the pod's current token to each request it relays.
// The gateway replaces the token before it expires (POST
// /v1/proxy-token), so a server that runs longer than one token keeps its
// egress, and a token taken from the pod still expires.
type Proxy struct {
	// Addr is the proxy's host:port.
	Addr string `json:"addr"`
	// User is the name the token is for (the pod's).
	User string `json:"user"`
	// Token is the pod's current token.
	Token string `json:"token"`
}

// TokenRequest is the body of POST /v1/proxy-token.
type TokenRequest struct {
	Token string `json:"token"`
}

// maxToken bounds a proxy token; tokens are short (egressproxy.Sign).
const maxToken = 1024

// checkToken refuses a token that could not be a proxy token: it goes
// into a header, so only URL-unreserved characters (what Sign makes).
func checkToken(tok string) error {
	if tok == "" || len(tok) > maxToken {
		return fmt.Errorf("a proxy token of %d bytes", len(tok))
	}
	for _, c := range []byte(tok) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~') {
			return errors.New("a proxy token holds a character outside [A-Za-z0-9._~-]")
		}
	}
	return nil
}

func (p *Proxy) check() error {
	if _, _, err := net.SplitHostPort(p.Addr); err != nil || p.Addr == "" {
		return fmt.Errorf("proxy address %q: want host:port", p.Addr)
	}
	if p.User == "" || len(p.User) > 253 || strings.ContainsAny(p.User, ":\r\n\x00") {
		return fmt.Errorf("proxy user %q is not a pod name", p.User)
	}
	return checkToken(p.Token)
}

// egressFront is the agent's proxy for its server: one loopback listener,
// a credential of its own that only the server is given (on a real pod
// nothing else shares its loopback; the test node shares the host's),
// and each connection's first request sent on to the egress proxy with
// the pod's current token. The egress proxy serves one request per
// connection (a CONNECT tunnel, or one plain request), so the rest of a
// connection is relayed as it comes, unparsed.
type egressFront struct {
	ln       net.Listener
	upstream string
	user     string
	// localUser and localPass are the credential the server must
	// send: only the server is given them.
	localUser, localPass string

	mu    sync.Mutex
	token string

	wg     sync.WaitGroup
	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// frontHeadTimeout bounds reading a request head from the server and the
// egress proxy's answer to a renewal.
const frontHeadTimeout = 30 * time.Second

// frontMaxHead bounds a request head from the server.
const frontMaxHead = 64 << 10

func newEgressFront(p Proxy) (*egressFront, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the egress proxy's listener: %w", err)
	}
	f := &egressFront{ln: ln, upstream: p.Addr, user: p.User, token: p.Token,
		localUser: "mcpbox", localPass: hex.EncodeToString(secret), conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// env is the server's proxy environment: the agent's listener with its
// local credential.
func (f *egressFront) env() map[string]string {
	u := (&url.URL{Scheme: "http", User: url.UserPassword(f.localUser, f.localPass), Host: f.ln.Addr().String()}).String()
	return map[string]string{"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u}
}

// setToken replaces the token and presents it to the egress proxy at
// once (ProxyRenewTarget), so that the proxy keeps the pod's open
// connections past the last token's end even if the server makes no new
// one.
func (f *egressFront) setToken(tok string) error {
	if err := checkToken(tok); err != nil {
		return err
	}
	f.mu.Lock()
	f.token = tok
	f.mu.Unlock()
	return f.present(tok)
}

// present CONNECTs to ProxyRenewTarget with tok; the proxy answers 204.
func (f *egressFront) present(tok string) error {
	c, err := net.DialTimeout("tcp", f.upstream, 10*time.Second)
	if err != nil {
		return fmt.Errorf("presenting the renewed token: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(frontHeadTimeout))
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: ProxyRenewTarget}, Host: ProxyRenewTarget,
		Header: http.Header{"Proxy-Authorization": {basic(f.user, tok)}, "User-Agent": {""}}}
	if err := req.Write(c); err != nil {
		return fmt.Errorf("presenting the renewed token: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return fmt.Errorf("presenting the renewed token: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("presenting the renewed token: the egress proxy answered %s", resp.Status)
	}
	return nil
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func (f *egressFront) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c, true) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.track(c, false)
			f.handle(c)
		}()
	}
}

// track adds or removes c from the open connections; false if the front
// is closed.
func (f *egressFront) track(c net.Conn, add bool) bool {
	f.connMu.Lock()
	defer f.connMu.Unlock()
	if !add {
		delete(f.conns, c)
		c.Close()
		return true
	}
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

// headLimit reads at most n bytes until lifted: a request head is bounded,
// what follows it is not.
type headLimit struct {
	r io.Reader
	n int
}

func (h *headLimit) Read(p []byte) (int, error) {
	if h.n < 0 {
		return h.r.Read(p)
	}
	if h.n == 0 {
		return 0, errors.New("request head too large")
	}
	if len(p) > h.n {
		p = p[:h.n]
	}
	n, err := h.r.Read(p)
	h.n -= n
	return n, err
}

// handle relays one connection of the server: its first request, with
// the local credential checked and replaced by the pod's token, then
// whatever follows, both ways, until either side ends.
func (f *egressFront) handle(c net.Conn) {
	hl := &headLimit{r: c, n: frontMaxHead}
	br := bufio.NewReaderSize(hl, 4096)
	c.SetReadDeadline(time.Now().Add(frontHeadTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		answer(c, http.StatusBadRequest, "reading the request: "+err.Error())
		return
	}
	c.SetReadDeadline(time.Time{})
	got := []byte(req.Header.Get("Proxy-Authorization"))
	if subtle.ConstantTimeCompare(got, []byte(basic(f.localUser, f.localPass))) != 1 {
		answer(c, http.StatusProxyAuthRequired, "the agent's proxy credentials are missing or wrong")
		return
	}
	if reservedTarget(req) {
		answer(c, http.StatusForbidden, "the token renewal name is the agent's")
		return
	}
	f.mu.Lock()
	tok := f.token
	f.mu.Unlock()
	req.Header.Set("Proxy-Authorization", basic(f.user, tok))
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // none added
	}
	up, err := net.DialTimeout("tcp", f.upstream, 10*time.Second)
	if err != nil {
		answer(c, http.StatusBadGateway, "reaching the egress proxy: "+err.Error())
		return
	}
	if !f.track(up, true) {
		up.Close()
		return
	}
	defer f.track(up, false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(c, up)
		closeWrite(c)
	}()
	// The head (and a plain request's body, framed as the server
	// framed it), then the rest of the stream: what br read ahead, and
	// the connection itself (spliced).
	hl.n = -1
	if err := req.WriteProxy(up); err == nil {
		if rest, _ := br.Peek(br.Buffered()); len(rest) == 0 || writeAll(up, rest) == nil {
			io.Copy(up, c)
		}
	}
	closeWrite(up)
	<-done
}

// reservedTarget reports whether req names ProxyRenewTarget's host (any
// port, case or trailing dot, as its target or its Host): the server
// never gets to present the pod's token there, so the renewal name
// stays the agent's alone whatever the egress proxy does with it.
func reservedTarget(req *http.Request) bool {
	reserved, _, _ := net.SplitHostPort(ProxyRenewTarget)
	for _, hp := range []string{req.Host, req.URL.Host} {
		h := hp
		if host, _, err := net.SplitHostPort(hp); err == nil {
			h = host
		}
		if strings.EqualFold(strings.TrimSuffix(h, "."), reserved) {
			return true
		}
	}
	return false
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

// closeWrite half-closes a TCP connection (the peer reads its end).
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// answer writes a short error response to the server.
func answer(c net.Conn, code int, msg string) {
	body := "mcpbox agent: " + msg + "\n"
	extra := ""
	if code == http.StatusProxyAuthRequired {
		extra = "Proxy-Authenticate: Basic realm=\"mcpbox agent\"\r\n"
	}
	c.SetWriteDeadline(time.Now().Add(frontHeadTimeout))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), extra, len(body), body)
}

// close stops the listener and ends every relayed connection.
func (f *egressFront) close() {
	f.connMu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.connMu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}
