package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeInjector intercepts one port, adds a header, refuses requests
// carrying "X-Refuse" and tags responses.
type fakeInjector struct{ port int }

func (f fakeInjector) Intercepts(host string, port int) bool {
	return host == "127.0.0.1" && port == f.port
}

func (f fakeInjector) Request(r *http.Request, t Target) (func(*http.Response) error, error) {
	if r.Header.Get("X-Refuse") != "" {
		return nil, fmt.Errorf("%w: told to", ErrRefused)
	}
	r.Header.Set("X-Injected", fmt.Sprintf("%s:%d tls=%v", t.Host, t.Port, t.TLS))
	return func(resp *http.Response) error { resp.Header.Set("X-Filtered", "yes"); return nil }, nil
}

func tlsServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, int) {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, s.Listener.Addr().(*net.TCPAddr).Port
}

func tlsProxyClient(t *testing.T, sock string, roots *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: h2,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitFor}
}

func TestInterceptAndTunnel(t *testing.T) {
	checkNoLeak(t)
	echo := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%d", r.Header.Get("X-Injected"), r.ProtoMajor)
	}
	srvI, portI := tlsServer(t, echo)
	srvT, portT := tlsServer(t, echo)
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srvI.Certificate())
	roots.AddCert(srvT.Certificate())
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "127.0.0.1", Ports: []int{portI, portT}}},
		Injector: fakeInjector{port: portI}, CA: ca, RootCAs: roots, Log: ev.log,
	})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.Certificate())
	for _, h2 := range []bool{false, true} {
		c := tlsProxyClient(t, sock, caPool, h2)
		resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/", portI))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// The upstream speaks what the client chose, as through a tunnel.
		want := fmt.Sprintf("127.0.0.1:%d tls=true|%d", portI, map[bool]int{false: 1, true: 2}[h2])
		if string(body) != want || resp.Header.Get("X-Filtered") != "yes" {
			t.Errorf("h2=%v: body %q (want %q), filtered %q", h2, body, want, resp.Header.Get("X-Filtered"))
		}
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/", portI), nil)
		req.Header.Set("X-Refuse", "1")
		resp, err = c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "egress request refused: told to") {
			t.Errorf("refusal: %d %q", resp.StatusCode, body)
		}
		c.Transport.(*http.Transport).CloseIdleConnections()
	}
	for range 2 {
		e := ev.next(t)
		if !e.Intercepted || e.Decision != "allow" || e.Port != portI || !strings.Contains(e.Reason, "told to") {
			t.Errorf("intercepted event = %+v", e)
		}
	}
	// The other host is a tunnel: its own certificate, no injection.
	pinned := x509.NewCertPool()
	pinned.AddCert(srvT.Certificate())
	pc := tlsProxyClient(t, sock, pinned, false)
	resp, err := pc.Get(fmt.Sprintf("https://127.0.0.1:%d/", portT))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pc.Transport.(*http.Transport).CloseIdleConnections()
	if string(body) != "|1" {
		t.Errorf("tunnelled body %q: it was intercepted", body)
	}
	if e := ev.next(t); e.Intercepted {
		t.Errorf("tunnel event marked intercepted: %+v", e)
	}
}

func TestInterceptRefusesUnverifiedUpstream(t *testing.T) {
	_, port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { t.Error("an unverified upstream got a request") })
	ca, _ := NewCA("test")
	_, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Injector: fakeInjector{port: port}, CA: ca, RootCAs: x509.NewCertPool(),
	})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.Certificate())
	resp, err := tlsProxyClient(t, sock, caPool, false).Get(fmt.Sprintf("https://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "certificate signed by unknown authority") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

func TestCA(t *testing.T) {
	ca, err := NewCA("mcpbox test")
	if err != nil {
		t.Fatal(err)
	}
	p := ca.CertPEM()
	if strings.Contains(string(p), "PRIVATE KEY") {
		t.Fatal("CertPEM carries a key")
	}
	blk, _ := pem.Decode(p)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || !cert.IsCA || !cert.MaxPathLenZero {
		t.Fatalf("CA cert: %v %+v", err, cert)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, host := range []string{"api.github.com", "127.0.0.1", "::1"} {
		l, err := ca.leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, CurrentTime: time.Now()}); err != nil {
			t.Errorf("leaf for %s: %v", host, err)
		}
		if _, err := l.Leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: pool}); err == nil {
			t.Errorf("leaf for %s also valid for other.example", host)
		}
		again, _ := ca.leaf(host)
		if again != l {
			t.Errorf("leaf for %s not cached", host)
		}
	}
	if _, err := New(Options{Injector: fakeInjector{}}); err == nil || !strings.Contains(err.Error(), "needs a CA") {
		t.Errorf("New with an Injector and no CA: %v", err)
	}
}

// TestInterceptMaxDuration: an intercepted connection kept alive past
// Limits.MaxDuration is closed like a tunnel would be.
func TestInterceptMaxDuration(t *testing.T) {
	checkNoLeak(t)
	srv, port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ca, _ := NewCA("test")
	ev := newEvents()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	p, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Injector: fakeInjector{port: port}, CA: ca, RootCAs: roots, Log: ev.log,
		// Long enough for the CONNECT, both TLS legs and the request on
		// a loaded host (300 ms was not: "Get: EOF").
		Limits: Limits{MaxDuration: 3 * time.Second},
	})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.Certificate())
	resp, err := tlsProxyClient(t, sock, caPool, false).Get(fmt.Sprintf("https://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close() // the connection stays open, idle in the client's pool
	e := ev.next(t)
	if e.Reason != ErrMaxDuration.Error() || !e.Intercepted {
		t.Errorf("event %+v, want the maximum duration", e)
	}
	if n := p.ActiveConns(); n != 0 {
		t.Errorf("%d connections open", n)
	}
}

// TestUpstreamTrustFromSSLCertFile: with RootCAs nil the upstream is
// verified against the host trust store, which honours SSL_CERT_FILE set
// for mcpbox itself. The store is read once per process, so the check
// runs in a child test process with the variable set.
func TestUpstreamTrustFromSSLCertFile(t *testing.T) {
	if os.Getenv("EGRESS_SSL_CHILD") == "" {
		srv, port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "trusted") })
		dir := t.TempDir()
		bundle, other := filepath.Join(dir, "bundle.pem"), filepath.Join(dir, "other.pem")
		if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		unrelated, _ := NewCA("unrelated")
		if err := os.WriteFile(other, unrelated.CertPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, trusted := range []bool{true, false} {
			env := []string{"EGRESS_SSL_CHILD=" + strconv.Itoa(port), "EGRESS_SSL_WANT=" + strconv.FormatBool(trusted),
				"SSL_CERT_DIR=" + filepath.Join(dir, "none")}
			if trusted {
				env = append(env, "SSL_CERT_FILE="+bundle)
			} else {
				env = append(env, "SSL_CERT_FILE="+other)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*waitFor)
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestUpstreamTrustFromSSLCertFile$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestUpstreamTrustFromSSLCertFile") {
				t.Errorf("child (trusted=%v): %v\n%s", trusted, err, out)
			}
		}
		return
	}
	port, _ := strconv.Atoi(os.Getenv("EGRESS_SSL_CHILD"))
	ca, _ := NewCA("test")
	_, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Injector: fakeInjector{port: port}, CA: ca,
	})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.Certificate())
	resp, err := tlsProxyClient(t, sock, caPool, false).Get(fmt.Sprintf("https://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := os.Getenv("EGRESS_SSL_WANT") == "true"; (resp.StatusCode == 200) != want {
		t.Errorf("status %d %q with SSL_CERT_FILE=%s", resp.StatusCode, body, os.Getenv("SSL_CERT_FILE"))
	}
}
