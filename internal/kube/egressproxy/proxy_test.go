package egressproxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/egress"
	"mcpbox/internal/podagent"
)

const waitFor = 10 * time.Second

// lines is a concurrency-safe log sink that parses the JSON lines.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

// wait returns the first line that match accepts, waiting for it.
func (l *lines) wait(t *testing.T, what string, match func(Line) bool) Line {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		raw := l.buf.String()
		l.mu.Unlock()
		for _, s := range strings.Split(strings.TrimSpace(raw), "\n") {
			if s == "" {
				continue
			}
			var ln Line
			if err := json.Unmarshal([]byte(s), &ln); err != nil {
				t.Fatalf("log line %q: %v", s, err)
			}
			if match(ln) {
				return ln
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("no log line for %s in:\n%s", what, l.buf.String())
	return Line{}
}

// clock is a settable clock for token expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type rig struct {
	p    *Proxy
	addr string
	key  []byte
	log  *lines
	clk  *clock
}

func loopback(port int) egress.Rule {
	return egress.Rule{CIDR: netip.MustParsePrefix("127.0.0.1/32"), Ports: []int{port}}
}

func startRig(t *testing.T, servers map[string]ServerPolicy, podOf func(net.Addr) (string, bool)) *rig {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{key: key, log: &lines{}, clk: &clock{now: time.Now()}}
	r.p, err = New(Options{Config: Config{Key: key, Servers: servers}, Log: r.log, Now: r.clk.Now, PodOf: podOf})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- r.p.Serve(l) }()
	t.Cleanup(func() {
		if err := r.p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(waitFor):
			t.Error("Serve did not return")
		}
	})
	return r
}

func (r *rig) token(pod, server string) string {
	return Sign(r.key, pod, server, r.clk.Now().Add(time.Hour))
}

// client is an HTTP client whose proxy is the pod's proxy URL, as the
// pod's environment sets it; pool trusts a TLS test server.
func (r *rig) client(t *testing.T, proxyURL string, pool *httptest.Server) *http.Client {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}
	if pool != nil {
		tr.TLSClientConfig = pool.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitFor}
}

func get(t *testing.T, c *http.Client, u string) (int, string, error) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func serve(t *testing.T, tlsToo bool, body string) (*httptest.Server, int) {
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Proxy-Authorization") != "" {
			t.Errorf("the target saw Proxy-Authorization")
		}
		io.WriteString(w, body)
	})
	var s *httptest.Server
	if tlsToo {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s, s.Listener.Addr().(*net.TCPAddr).Port
}

func TestTokenOpensItsServersAllowlistOnly(t *testing.T) {
	srvA, portA := serve(t, false, "hello a")
	srvB, portB := serve(t, true, "hello b")
	r := startRig(t, map[string]ServerPolicy{
		"a": {Rules: []egress.Rule{loopback(portA)}},
		"b": {Rules: []egress.Rule{loopback(portB)}},
	}, nil)
	envA := ProxyEnv(r.addr, "pod-a", r.token("pod-a", "a"))
	if envA["HTTPS_PROXY"] != envA["http_proxy"] || !strings.HasPrefix(envA["HTTP_PROXY"], "http://pod-a:v1.") {
		t.Fatalf("env = %v", envA)
	}
	ca := r.client(t, envA["HTTP_PROXY"], srvB)

	// Plain HTTP to a's allowed target.
	code, body, err := get(t, ca, srvA.URL+"/x")
	if err != nil || code != 200 || body != "hello a" {
		t.Fatalf("a -> a: %d %q %v", code, body, err)
	}
	ln := r.log.wait(t, "a's allow", func(l Line) bool { return l.Pod == "pod-a" && l.Decision == "allow" })
	if ln.Server != "a" || ln.Kind != "http" || ln.Port != portA || ln.IP != "127.0.0.1" || ln.BytesDown == 0 {
		t.Errorf("a's line = %+v", ln)
	}
	// a's token does not open b's (TLS, CONNECT) target.
	if code, _, err := get(t, ca, srvB.URL); err == nil || code == 200 || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("a -> b: %d %v, want a refused CONNECT", code, err)
	}
	ln = r.log.wait(t, "a's denial of b", func(l Line) bool { return l.Pod == "pod-a" && l.Decision == "deny" })
	if ln.Server != "a" || ln.Kind != "connect" || ln.Port != portB || !strings.Contains(ln.Reason, "no rule allows") {
		t.Errorf("a's denial = %+v", ln)
	}
	// b's token: a CONNECT tunnel carries TLS end to end.
	cb := r.client(t, ProxyURL(r.addr, "pod-b", r.token("pod-b", "b")), srvB)
	if code, body, err := get(t, cb, srvB.URL); err != nil || code != 200 || body != "hello b" {
		t.Fatalf("b -> b over CONNECT: %d %q %v", code, body, err)
	}
	ln = r.log.wait(t, "b's allow", func(l Line) bool { return l.Pod == "pod-b" && l.Decision == "allow" })
	if ln.Server != "b" || ln.Kind != "connect" || ln.BytesUp == 0 || ln.BytesDown == 0 {
		t.Errorf("b's line = %+v", ln)
	}
	if n := r.p.Pods(); n != 2 {
		t.Errorf("Pods() = %d, want 2", n)
	}
}

func TestRefusedTokens(t *testing.T) {
	srvA, portA := serve(t, false, "hello a")
	r := startRig(t, map[string]ServerPolicy{"a": {Rules: []egress.Rule{loopback(portA)}}}, nil)
	otherKey, _ := NewKey()
	good := r.token("pod-a", "a")
	for _, tc := range []struct{ name, proxy, want string }{
		{"no token", "http://" + r.addr, "no proxy credentials"},
		{"forged", ProxyURL(r.addr, "pod-a", Sign(otherKey, "pod-a", "a", r.clk.Now().Add(time.Hour))), "invalid token"},
		{"expired", ProxyURL(r.addr, "pod-a", Sign(r.key, "pod-a", "a", r.clk.Now().Add(-time.Second))), "token expired"},
		{"another pod's", ProxyURL(r.addr, "pod-x", good), "invalid token"},
		{"server renamed", ProxyURL(r.addr, "pod-a", "v1.Yg"+good[strings.Index(good[3:], ".")+3:]), "invalid token"},
		{"garbage", ProxyURL(r.addr, "pod-a", "v1.a.b.c"), "invalid token"},
		{"unknown server", ProxyURL(r.addr, "pod-a", r.token("pod-a", "nope")), "server nope has no egress allowlist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := get(t, r.client(t, tc.proxy, nil), srvA.URL)
			if err != nil || code != http.StatusProxyAuthRequired || !strings.Contains(body, tc.want) {
				t.Errorf("got %d %q %v, want 407 %q", code, body, err, tc.want)
			}
			ln := r.log.wait(t, tc.name, func(l Line) bool { return strings.Contains(l.Reason, tc.want) })
			// No server and no pod: the gateway audits a line for the pod
			// it names only when a verified token named it (never the
			// name a refused request claimed).
			if ln.Decision != "deny" || ln.Server != "" || ln.Pod != "" || ln.Port != portA || ln.BytesUp != 0 {
				t.Errorf("line = %+v", ln)
			}
		})
	}
	// A CONNECT without a token is refused the same way.
	c, err := net.DialTimeout("tcp", r.addr, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", portA, portA)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("CONNECT without a token: %v %v", resp, err)
	}
}

func TestInternalRangesRefused(t *testing.T) {
	r := startRig(t, map[string]ServerPolicy{"a": {Rules: []egress.Rule{{Host: "*", Ports: []int{80, 443}}}}}, nil)
	c := r.client(t, ProxyURL(r.addr, "pod-a", r.token("pod-a", "a")), nil)
	for _, tc := range []struct{ url, want string }{
		{"http://169.254.169.254/latest/meta-data/", "blocked link-local"},
		{"http://10.0.0.1/", "blocked private"},
		{"http://10.96.0.1/", "blocked private"}, // a typical service range
		{"http://127.0.0.1/", "blocked loopback"},
		{"http://metadata.google.internal/", "cloud metadata host name"},
	} {
		code, body, err := get(t, c, tc.url)
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q %v, want 403 %q", tc.url, code, body, err, tc.want)
		}
		r.log.wait(t, tc.url, func(l Line) bool {
			return l.Pod == "pod-a" && l.Decision == "deny" && strings.Contains(l.Reason, tc.want)
		})
	}
}

func TestPodByteBudgetAndExpiry(t *testing.T) {
	srv, port := serve(t, false, strings.Repeat("x", 4000))
	r := startRig(t, map[string]ServerPolicy{"a": {Rules: []egress.Rule{loopback(port)},
		Limits: egress.Limits{MaxBytesTotal: 2000}}}, nil)
	c1 := r.client(t, ProxyURL(r.addr, "pod-1", r.token("pod-1", "a")), nil)
	if code, body, err := get(t, c1, srv.URL); err == nil && code == 200 && len(body) == 4000 {
		t.Fatalf("4000 bytes through a 2000-byte budget")
	}
	r.log.wait(t, "the byte limit", func(l Line) bool { return l.Pod == "pod-1" && strings.Contains(l.Reason, egress.ErrByteLimit.Error()) })
	code, body, _ := get(t, c1, srv.URL)
	if code != http.StatusForbidden || !strings.Contains(body, "byte budget is used up") {
		t.Errorf("after the budget: %d %q", code, body)
	}
	// The budget is the pod's: another pod of the server has its own.
	c2 := r.client(t, ProxyURL(r.addr, "pod-2", r.token("pod-2", "a")), nil)
	resp, err := c2.Get(srv.URL)
	if err != nil {
		t.Fatalf("pod-2: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("pod-2: %s", resp.Status)
	}
	if n := r.p.Pods(); n != 2 {
		t.Fatalf("Pods() = %d", n)
	}
	// Past the tokens' expiry the pods' proxies go; a token made later
	// still works.
	r.clk.add(2 * time.Hour)
	c3 := r.client(t, ProxyURL(r.addr, "pod-3", r.token("pod-3", "a")), nil)
	if code, _, err := get(t, c3, "http://127.0.0.1:1/"); err != nil || code != http.StatusForbidden {
		t.Errorf("pod-3: %d %v", code, err)
	}
	if n := r.p.Pods(); n != 1 {
		t.Errorf("Pods() after expiry = %d, want 1", n)
	}
	if code, body, _ := get(t, c1, srv.URL); code != http.StatusProxyAuthRequired || !strings.Contains(body, "token expired") {
		t.Errorf("pod-1 after expiry: %d %q", code, body)
	}
}

func TestSetConfigAndPodOf(t *testing.T) {
	srv, port := serve(t, false, "ok")
	var mu sync.Mutex
	owner := "pod-a"
	r := startRig(t, map[string]ServerPolicy{"a": {Rules: []egress.Rule{loopback(port)}}},
		func(a net.Addr) (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			return owner, a != nil && strings.HasPrefix(a.String(), "127.0.0.1:")
		})
	c := r.client(t, ProxyURL(r.addr, "pod-a", r.token("pod-a", "a")), nil)
	if code, _, err := get(t, c, srv.URL); err != nil || code != 200 {
		t.Fatalf("before: %d %v", code, err)
	}
	// The token from an address PodOf gives another pod: refused.
	mu.Lock()
	owner = "pod-z"
	mu.Unlock()
	if code, body, _ := get(t, c, srv.URL); code != http.StatusProxyAuthRequired || !strings.Contains(body, "not the pod's") {
		t.Errorf("from another pod's address: %d %q", code, body)
	}
	mu.Lock()
	owner = "pod-a"
	mu.Unlock()
	// A new config without server a: its pods lose egress.
	if err := r.p.SetConfig(Config{Key: r.key, Servers: map[string]ServerPolicy{}}); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := get(t, c, srv.URL); code != http.StatusProxyAuthRequired || !strings.Contains(body, "no egress allowlist") {
		t.Errorf("after a left the config: %d %q", code, body)
	}
	if err := r.p.SetConfig(Config{Key: r.key[:8]}); err == nil {
		t.Error("SetConfig took a short key")
	}
	if _, err := ParseConfig([]byte(`{"key":"` + strings.Repeat("A", 44) + `","servers":{"s":{"rules":[{"Host":"a b"}]}}}`)); err == nil {
		t.Error("ParseConfig took an invalid rule")
	}
}

func TestVerify(t *testing.T) {
	key, _ := NewKey()
	now := time.Now()
	tok := Sign(key, "p", "srv", now.Add(time.Minute))
	if s, exp, err := Verify(key, "p", tok, now); err != nil || s != "srv" || exp.Unix() != now.Add(time.Minute).Unix() {
		t.Fatalf("Verify = %q %v %v", s, exp, err)
	}
	// Every single-character change of the token is refused.
	for i := range tok {
		for _, c := range []byte{'A', '0', '.', '_'} {
			if tok[i] == c {
				continue
			}
			bad := tok[:i] + string(c) + tok[i+1:]
			if s, _, err := Verify(key, "p", bad, now); err == nil {
				t.Fatalf("Verify accepted %q (from %q) as %q", bad, tok, s)
			}
		}
	}
	// Nor is another spelling of it: encoding/base64 skips \r and \n
	// even when strict, in the MAC as in the server's name.
	for i := range tok {
		for _, c := range []string{"\n", "\r", "\r\n"} {
			bad := tok[:i] + c + tok[i:]
			if s, _, err := Verify(key, "p", bad, now); err == nil {
				t.Fatalf("Verify accepted %q (from %q) as %q", bad, tok, s)
			}
		}
	}
	if _, _, err := Verify(key[:16], "p", tok, now); err == nil {
		t.Error("a short key verified")
	}
	if _, _, err := Verify(key, "p", tok, now.Add(time.Minute)); err != ErrTokenExpired {
		t.Errorf("at expiry: %v", err)
	}
	if u, err := url.Parse(ProxyURL("10.0.0.1:3128", "p", tok)); err != nil || u.User.Username() != "p" {
		t.Errorf("ProxyURL: %v %v", u, err)
	} else if pw, _ := u.User.Password(); pw != tok || strings.Contains(u.String(), "%") {
		t.Errorf("ProxyURL escaped the token: %s", u)
	}
}

// TestRenewedTokenKeepsConnections: a pod's agent presents each renewed
// token at once (CONNECT podagent.ProxyRenewTarget: 204, never dialed,
// not logged), so that the pod's proxy — and a tunnel opened with the
// first token — lives on past the first token's end, while the first
// token itself is refused from then on; once the newest token has
// ended too, the pod's tunnel is closed as before. A renewal target with
// a bad token gets 407 like any request.
func TestRenewedTokenKeepsConnections(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	port := echo.Addr().(*net.TCPAddr).Port
	r := startRig(t, map[string]ServerPolicy{"a": {Rules: []egress.Rule{loopback(port)}}}, nil)
	t0 := r.clk.Now()
	first := Sign(r.key, "pod-1", "a", t0.Add(10*time.Second))

	// connect sends a CONNECT with tok; the status, and the connection
	// if it is a tunnel.
	connect := func(target, tok string) (int, net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.DialTimeout("tcp", r.addr, waitFor)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(waitFor))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target,
			base64.StdEncoding.EncodeToString([]byte("pod-1:"+tok)))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			c.Close()
			return resp.StatusCode, nil, nil
		}
		t.Cleanup(func() { c.Close() })
		return resp.StatusCode, c, br
	}
	echoes := func(c net.Conn, br *bufio.Reader, msg string) bool {
		c.SetDeadline(time.Now().Add(waitFor))
		if _, err := io.WriteString(c, msg+"\n"); err != nil {
			return false
		}
		got, err := br.ReadString('\n')
		return err == nil && got == msg+"\n"
	}
	code, tunnel, br := connect(echo.Addr().String(), first)
	if code != http.StatusOK || !echoes(tunnel, br, "one") {
		t.Fatalf("the tunnel with the first token: %d", code)
	}
	renewed := Sign(r.key, "pod-1", "a", t0.Add(100*time.Second))
	if code, _, _ := connect(podagent.ProxyRenewTarget, renewed); code != http.StatusNoContent {
		t.Fatalf("presenting the renewed token: %d, want 204", code)
	}
	if code, _, _ := connect(podagent.ProxyRenewTarget, "v1.forged.1.x"); code != http.StatusProxyAuthRequired {
		t.Errorf("presenting a forged token: %d, want 407", code)
	}
	// Past the first token's end and a sweep (any request sweeps once a
	// minute has passed): the tunnel still carries.
	r.clk.add(70 * time.Second)
	if code, _, _ := connect(podagent.ProxyRenewTarget, renewed); code != http.StatusNoContent {
		t.Fatalf("the renewed token after the first one's end: %d", code)
	}
	if !echoes(tunnel, br, "two") {
		t.Error("the tunnel opened with the first token ended at its end, though a renewed token was presented")
	}
	if code, _, _ := connect(echo.Addr().String(), first); code != http.StatusProxyAuthRequired {
		t.Errorf("the first token after its end: %d, want 407", code)
	}
	// Past the renewed token's end, a sweep: the pod's tunnel goes.
	r.clk.add(100 * time.Second)
	later := Sign(r.key, "pod-2", "a", r.clk.Now().Add(time.Hour))
	c, err := net.DialTimeout("tcp", r.addr, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", podagent.ProxyRenewTarget, podagent.ProxyRenewTarget,
		base64.StdEncoding.EncodeToString([]byte("pod-2:"+later)))
	c.SetDeadline(time.Now().Add(waitFor))
	io.Copy(io.Discard, c)
	c.Close()
	closed := false
	for end := time.Now().Add(waitFor); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !echoes(tunnel, br, "three") {
			closed = true
			break
		}
	}
	if !closed {
		t.Error("the tunnel outlived the pod's newest token")
	}
	// No presentation is logged: every line naming pod-1 is of its
	// tunnel (a refused request's line names no pod). The lines of the
	// pod-2 step are in, so the earlier ones are too.
	r.log.wait(t, "pod-2's presentation's sweep", func(l Line) bool { return true })
	time.Sleep(200 * time.Millisecond)
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	for _, s := range strings.Split(strings.TrimSpace(r.log.buf.String()), "\n") {
		var ln Line
		if json.Unmarshal([]byte(s), &ln) == nil && ln.Pod != "" && ln.Port != port {
			t.Errorf("a presented token was logged: %s", s)
		}
	}
}
