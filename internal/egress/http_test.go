package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// proxyClient is an http.Client that uses the proxy on sock for http://.
func proxyClient(t *testing.T, sock string) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid:3128"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitFor}
}

func TestPlainHTTP(t *testing.T) {
	checkNoLeak(t)
	type seen struct {
		uri, host, proxyConn, proxyAuth, custom string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.Host, r.Header.Get("Proxy-Connection"), r.Header.Get("Proxy-Authorization"), r.Header.Get("X-Hop")}
		w.Header().Set("Keep-Alive", "timeout=5")
		io.WriteString(w, "tarball bytes")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := newResolver(map[string][]string{"registry.npmjs.org": {"127.0.0.1"}})
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "registry.npmjs.org", Ports: []int{port}, CIDR: netip.MustParsePrefix("127.0.0.1/32")}},
		Resolver: res,
		Log:      ev.log,
	})
	u := fmt.Sprintf("http://registry.npmjs.org:%d/@types/node/-/node-20.1.0.tgz?x=1", port)
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	resp, err := proxyClient(t, sock).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "tarball bytes" || resp.StatusCode != 200 {
		t.Fatalf("response = %d %q", resp.StatusCode, body)
	}
	if !resp.Close || resp.Header.Get("Keep-Alive") != "" {
		t.Errorf("response not Connection: close or kept hop-by-hop headers: close=%v %v", resp.Close, resp.Header)
	}
	s := <-got
	want := seen{uri: "/@types/node/-/node-20.1.0.tgz?x=1", host: fmt.Sprintf("registry.npmjs.org:%d", port)}
	if s != want {
		t.Errorf("origin saw %+v, want %+v", s, want)
	}
	e := ev.next(t)
	if e.Kind != "http" || e.Decision != "allow" || e.Package != "@types/node" || e.Version != "20.1.0" ||
		e.BytesUp == 0 || e.BytesDown == 0 || e.IP != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("event = %+v", e)
	}
}

func TestPlainHTTPDenied(t *testing.T) {
	checkNoLeak(t)
	ev := newEvents()
	_, sock := startProxy(t, Options{Rules: []Rule{{Host: "*"}}, Log: ev.log})
	resp, err := proxyClient(t, sock).Get("http://169.254.169.254/latest/meta-data/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "link-local") {
		t.Errorf("GET metadata = %d %q, want 403 link-local", resp.StatusCode, body)
	}
	if e := ev.next(t); e.Decision != "deny" || e.Kind != "http" || e.Host != "169.254.169.254" || e.Port != 80 {
		t.Errorf("event = %+v", e)
	}
}

// TestMalformed: garbage, oversized and slow request heads get a clear
// error and a closed connection.
func TestMalformed(t *testing.T) {
	checkNoLeak(t)
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "*"}},
		Limits: Limits{HeaderTimeout: 300 * time.Millisecond},
		Log:    ev.log,
	})
	tests := []struct {
		name, send, status string
		wait               bool // send nothing more: the header timeout must fire
	}{
		{name: "garbage", send: "\x16\x03\x01\x02\x00garbage\r\n\r\n", status: "400"},
		{name: "huge header", send: "GET http://a.example/ HTTP/1.1\r\nX: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", status: "431"},
		{name: "slowloris", send: "GET http://a.example/ HTTP/1.1\r\nX: 1\r\n", status: "408", wait: true},
		{name: "origin form", send: "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", status: "400"},
		{name: "https absolute", send: "GET https://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", status: "400"},
		{name: "connect no port", send: "CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n", status: "400"},
		{name: "connect bad port", send: "CONNECT a.example:99999 HTTP/1.1\r\n\r\n", status: "400"},
		{name: "connect bad host", send: "CONNECT a_b..c:443 HTTP/1.1\r\n\r\n", status: "403"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialUnix(t, sock)
			start := time.Now()
			io.WriteString(c, tt.send)
			reply, err := io.ReadAll(c) // proxy must close after replying
			if err != nil && !isEOFOrReset(err) {
				t.Fatalf("reading reply: %v", err)
			}
			if !strings.HasPrefix(string(reply), "HTTP/1.1 "+tt.status+" ") {
				t.Errorf("reply = %.120q, want status %s", reply, tt.status)
			}
			if tt.wait && time.Since(start) > 3*time.Second {
				t.Errorf("slow request answered after %v, want about the header timeout", time.Since(start))
			}
			if e := ev.next(t); e.Decision != "deny" || e.Reason == "" {
				t.Errorf("event = %+v, want deny with reason", e)
			}
		})
	}
}

// TestOpened: a connection is reported once its target is decided, before
// it ends (with no bytes yet), allowed or denied; Log still gets the end.
func TestOpened(t *testing.T) {
	checkNoLeak(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "late")
	}))
	defer srv.Close()
	defer close(release)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	opened, ended := newEvents(), newEvents()
	_, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Log:    ended.log,
		Opened: opened.log,
	})
	done := make(chan error, 1)
	go func() {
		resp, err := proxyClient(t, sock).Get(fmt.Sprintf("http://127.0.0.1:%d/x", port))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// The request still hangs in the origin: only Opened can have fired.
	e := opened.next(t)
	if e.Decision != "allow" || e.Host != "127.0.0.1" || e.Port != port || e.BytesDown != 0 || e.Rule == "" {
		t.Errorf("opened event = %+v", e)
	}
	select {
	case ev := <-ended.ch:
		t.Fatalf("Log before the connection ended: %+v", ev)
	default:
	}
	release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e := ended.next(t); e.Decision != "allow" || e.BytesDown == 0 {
		t.Errorf("ended event = %+v", e)
	}
	go func() {
		resp, err := proxyClient(t, sock).Get("http://127.0.0.1:1/denied")
		if err == nil {
			resp.Body.Close()
		}
	}()
	if e := opened.next(t); e.Decision != "deny" || e.Port != 1 {
		t.Errorf("opened event of a denied target = %+v", e)
	}
}
