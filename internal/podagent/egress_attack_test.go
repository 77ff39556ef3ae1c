package podagent

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingUpstream stands for the egress proxy: it keeps each
// connection's first request head and answers 200 with a fixed body.
type recordingUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	heads []*http.Request
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &recordingUpstream{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				u.mu.Lock()
				u.heads = append(u.heads, req)
				u.mu.Unlock()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return u
}

func (u *recordingUpstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.heads...)
}

// frontExchange sends raw to the front and returns all it answers.
func frontExchange(t *testing.T, f *egressFront, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", f.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestFrontHeaderSmuggling: the server cannot pass the front without its
// local credential (none, a wrong one, the right one only as a second
// header, a token of its own), nor send the egress proxy a credential of
// its own beside the pod's, nor read the pod's token in any answer; an
// HTTP/1.0 request and a CONNECT with a body carry the pod's token alone.
func TestFrontHeaderSmuggling(t *testing.T) {
	up := newRecordingUpstream(t)
	const tok = "v1.c2VydmVy.9999999999.podtokenSECRET"
	f, err := newEgressFront(Proxy{Addr: up.ln.Addr().String(), User: "pod-1", Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	local := basic(f.localUser, f.localPass)
	podAuth := basic("pod-1", tok)
	encTok := base64.StdEncoding.EncodeToString([]byte("pod-1:" + tok))

	refused := []string{
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: Basic bWNwYm94Ong=\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: Basic bWNwYm94Ong=\r\nProxy-Authorization: " + local + "\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + podAuth + "\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + strings.ToLower(local[:6]) + local[6:] + "x\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + local + ",x\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy_Authorization: " + local + "\r\n\r\n",
	}
	for _, raw := range refused {
		got := frontExchange(t, f, raw)
		if !strings.HasPrefix(got, "HTTP/1.1 407 ") && !strings.HasPrefix(got, "HTTP/1.1 400 ") {
			t.Errorf("%q: answered %.200q", raw, got)
		}
		if strings.Contains(got, tok) || strings.Contains(got, encTok) {
			t.Errorf("%q: the answer holds the pod's token", raw)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d refused requests reached the egress proxy", n)
	}

	passed := []string{
		"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + local + "\r\nProxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("pod-2:other")) + "\r\n\r\n",
		"GET http://example.com/ HTTP/1.0\r\nProxy-Authorization: " + local + "\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: " + local + "\r\nContent-Length: 60\r\n\r\n" +
			"GET / HTTP/1.1\r\nProxy-Authorization: Basic cG9kLTI6b3RoZXI=\r\n\r\n",
		"POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + local + "\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
	}
	for _, raw := range passed {
		got := frontExchange(t, f, raw)
		if !strings.HasPrefix(got, "HTTP/1.1 200 ") || strings.Contains(got, tok) || strings.Contains(got, encTok) {
			t.Errorf("%q: answered %.200q", raw, got)
		}
	}
	reqs := up.requests()
	if len(reqs) != len(passed) {
		t.Fatalf("%d requests reached the egress proxy, want %d", len(reqs), len(passed))
	}
	for _, r := range reqs {
		if v := r.Header.Values("Proxy-Authorization"); len(v) != 1 || v[0] != podAuth {
			t.Errorf("%s %s: the egress proxy got Proxy-Authorization %q, want the pod's token alone", r.Method, r.RequestURI, v)
		}
	}
}

// TestFrontRefusesRenewTarget: the reserved renewal name is the agent's
// alone: the server's CONNECT to it (any spelling) is refused by the
// front and never reaches the egress proxy with the pod's token, so a
// server cannot present tokens (or make unlogged connections) there.
func TestFrontRefusesRenewTarget(t *testing.T) {
	up := newRecordingUpstream(t)
	f, err := newEgressFront(Proxy{Addr: up.ln.Addr().String(), User: "pod-1", Token: "v1.x.1.y"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	local := basic(f.localUser, f.localPass)
	for _, target := range []string{ProxyRenewTarget, strings.ToUpper(ProxyRenewTarget), "mcpbox-token-renewal.invalid.:1"} {
		got := frontExchange(t, f, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+local+"\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 403 ") {
			t.Errorf("CONNECT %s: answered %.200q", target, got)
		}
	}
	got := frontExchange(t, f, "GET http://"+ProxyRenewTarget+"/ HTTP/1.1\r\nHost: "+ProxyRenewTarget+"\r\nProxy-Authorization: "+local+"\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 403 ") {
		t.Errorf("GET to the renewal name: answered %.200q", got)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d requests to the renewal name reached the egress proxy", n)
	}
}
