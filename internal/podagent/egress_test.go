//go:build linux

package podagent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

// tokenProxy is an egress front (egress.Options.Authorize, as the
// Kubernetes egress proxy's) whose tokens are issued by the test, each
// good for life, for one pod; it counts how often each was presented.
type tokenProxy struct {
	pod  string
	life time.Duration
	p    *egress.Proxy // the pod's own
	addr string

	mu      sync.Mutex
	n       int
	expiry  map[string]time.Time
	used    map[string]int
	refused []string
}

func newTokenProxy(t *testing.T, pod string, life time.Duration, allow egress.Rule) *tokenProxy {
	t.Helper()
	tp := &tokenProxy{pod: pod, life: life, expiry: map[string]time.Time{}, used: map[string]int{}}
	var err error
	if tp.p, err = egress.New(egress.Options{SandboxID: pod, Rules: []egress.Rule{allow}}); err != nil {
		t.Fatal(err)
	}
	front, err := egress.New(egress.Options{Authorize: tp.authorize, RenewTarget: ProxyRenewTarget,
		Limits: egress.Limits{HeaderTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go front.Serve(l)
	t.Cleanup(func() {
		front.Close()
		tp.p.Close()
	})
	tp.addr = l.Addr().String()
	return tp
}

// issue returns a new token, good for tp.life from now.
func (tp *tokenProxy) issue() (string, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.n++
	tok := fmt.Sprintf("tok-%d-%s", tp.n, random(nil))
	tp.expiry[tok] = time.Now().Add(tp.life)
	return tok, nil
}

func (tp *tokenProxy) authorize(user, pass string, _ net.Addr) (*egress.Proxy, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	exp, ok := tp.expiry[pass]
	if user != tp.pod || !ok || !time.Now().Before(exp) {
		tp.refused = append(tp.refused, pass)
		return nil, fmt.Errorf("token refused")
	}
	tp.used[pass]++
	return tp.p, nil
}

// TestAgentFrontsEgressProxy: with a StartRequest.Proxy the server's
// proxy variables name the agent's loopback listener with a credential of
// its own, never the proxy or the token; the agent adds the pod's token
// to each request it relays; the gateway's connection renews the token
// (here every second, each good for 3 s), so the server still reaches
// its target after the first token's end, while that token, presented to
// the proxy directly, is refused. Each renewed token is presented to the
// proxy at once, with no request of the server's. The agent's listener
// refuses a client without its credential, and /v1/proxy-token a token
// that could not be one.
func TestAgentFrontsEgressProxy(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Errorf("the target saw Proxy-Authorization")
		}
		io.WriteString(w, "target-body")
	}))
	defer target.Close()
	tu, _ := url.Parse(target.URL)
	port := tu.Port()
	var portN int
	fmt.Sscan(port, &portN)
	const life = 3 * time.Second
	tp := newTokenProxy(t, "pod-e", life, egress.Rule{Host: "127.0.0.1", Ports: []int{portN}})

	p := startPod(t, "pod-e", podOpts{})
	first, _ := tp.issue()
	firstEnd := time.Now().Add(life)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var renewErrs []error
	var errMu sync.Mutex
	c, err := ConnectWith(ctx, p.addr, p.name, p.ca, StartRequest{Proxy: &Proxy{Addr: tp.addr, User: "pod-e", Token: first}},
		ConnectOptions{Renew: &Renewal{Every: time.Second, Retry: 200 * time.Millisecond, Token: tp.issue,
			Failed: func(err error) { errMu.Lock(); renewErrs = append(renewErrs, err); errMu.Unlock() }}})
	if err != nil {
		t.Fatalf("Connect: %v\nagent:\n%s", err, p.log())
	}
	t.Cleanup(func() { c.Close() })
	cs := session(t, c, nil, "")

	get := func() string {
		t.Helper()
		got, err := callText(t, cs, "http_get", map[string]any{"url": target.URL + "/x"})
		if err != nil {
			t.Fatalf("http_get: %v\nagent:\n%s", err, p.log())
		}
		return got
	}
	if got := get(); got != "200 target-body" {
		t.Fatalf("http_get through the agent = %q\nagent:\n%s", got, p.log())
	}
	proxyURL, err := callText(t, cs, "getenv", map[string]any{"text": "HTTPS_PROXY"})
	if err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(proxyURL)
	if err != nil || !strings.HasPrefix(pu.Host, "127.0.0.1:") || pu.Host == tp.addr || pu.User == nil {
		t.Fatalf("the server's HTTPS_PROXY = %q (%v): want the agent's loopback listener with its credential", proxyURL, err)
	}
	environ, err := callText(t, cs, "read_any", map[string]any{"path": "/proc/self/environ"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(environ, "tok-") || strings.Contains(environ, tp.addr) {
		t.Errorf("the server's environment holds a token or the proxy's address:\n%s", environ)
	}

	// Past the first token's end: the server's requests still leave,
	// with a newer token.
	time.Sleep(time.Until(firstEnd.Add(500 * time.Millisecond)))
	if got := get(); got != "200 target-body" {
		t.Fatalf("http_get after the first token's end = %q\nagent:\n%s", got, p.log())
	}
	tp.mu.Lock()
	renewals := tp.n
	var presented int
	for tok, n := range tp.used {
		if tok != first && n > 0 {
			presented++
		}
	}
	tp.mu.Unlock()
	if renewals < 3 || presented < 2 {
		t.Errorf("%d tokens issued, %d renewed ones presented to the proxy: want the renewals every second", renewals, presented)
	}
	// The first token, as a thief would use it: refused.
	if code := directCONNECT(t, tp.addr, "pod-e", first, target.Listener.Addr().String()); code != http.StatusProxyAuthRequired {
		t.Errorf("the expired first token: %d, want 407", code)
	}

	// The agent's listener, without its credential or with another.
	for name, user := range map[string]*url.Userinfo{"none": nil, "wrong": url.UserPassword("mcpbox", "guess"),
		"the pod's token": url.UserPassword("pod-e", first)} {
		cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: pu.Host, User: user})}}
		resp, err := cl.Get(target.URL + "/y")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		resp.Body.Close()
		cl.CloseIdleConnections()
		if resp.StatusCode != http.StatusProxyAuthRequired {
			t.Errorf("the agent's proxy with %s credentials: %s, want 407", name, resp.Status)
		}
	}

	// /v1/proxy-token refuses what cannot be a token.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: p.ca.ClientTLS(p.name)}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for _, body := range []string{`{"token":""}`, `{"token":"a b"}`, `{"token":"x\r\nX-Evil: 1"}`, `{"token":"ok","more":1}`} {
		resp, err := client.Post("https://"+p.addr+"/v1/proxy-token", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("/v1/proxy-token %s: %s, want 400", body, resp.Status)
		}
	}
	errMu.Lock()
	defer errMu.Unlock()
	if len(renewErrs) > 0 {
		t.Errorf("renewals failed: %v", renewErrs)
	}
}

// directCONNECT sends a CONNECT to target through the proxy at addr with
// user and token, and returns the status.
func directCONNECT(t *testing.T, addr, user, token, target string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, basic(user, token))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAgentProxyTokenWithoutProxy: a server started without a Proxy has
// no token to renew (409), and a start whose Proxy is malformed is
// refused before anything runs.
func TestAgentProxyTokenWithoutProxy(t *testing.T) {
	p := startPod(t, "pod-n", podOpts{})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: p.ca.ClientTLS(p.name)}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Post("https://"+p.addr+"/v1/start", "application/json",
		strings.NewReader(`{"proxy":{"addr":"nohost","user":"pod-n","token":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a start with a malformed proxy: %s, want 400", resp.Status)
	}
	c := connect(t, p, StartRequest{})
	_ = c
	resp, err = client.Post("https://"+p.addr+"/v1/proxy-token", "application/json", strings.NewReader(`{"token":"v1.abc"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("/v1/proxy-token without a proxy: %s, want 409", resp.Status)
	}
}
