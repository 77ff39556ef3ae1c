package credinject

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

const waitFor = 10 * time.Second // bound on every wait in these tests

// seen is what a test upstream received.
type seen struct {
	Method, Host, URI string
	Header            http.Header
	Body              []byte
	Trailer           http.Header // after the body was read
	Proto             int
	TLSName           string
}

// upstream is a loopback HTTPS (or HTTP) test service.
type upstream struct {
	*httptest.Server
	port int
	mu   sync.Mutex
	got  []seen // guarded by mu
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

func (u *upstream) hostPort() string { return "127.0.0.1:" + strconv.Itoa(u.port) }

// startUpstream runs h behind a recorder; tls: HTTPS with HTTP/2 enabled.
func startUpstream(t testing.TB, useTLS bool, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s := seen{Method: r.Method, Host: r.Host, URI: r.RequestURI, Header: r.Header.Clone(), Body: body, Trailer: r.Trailer.Clone(), Proto: r.ProtoMajor}
		if r.TLS != nil {
			s.TLSName = r.TLS.ServerName
		}
		u.mu.Lock()
		u.got = append(u.got, s)
		u.mu.Unlock()
		h(w, r)
	}))
	u.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the tests break on purpose
	if useTLS {
		u.EnableHTTP2 = true
		u.StartTLS()
	} else {
		u.Start()
	}
	t.Cleanup(u.Close)
	u.port = u.Listener.Addr().(*net.TCPAddr).Port
	return u
}

// pool returns a cert pool holding the given upstreams' certificates.
func pool(us ...*upstream) *x509.CertPool {
	p := x509.NewCertPool()
	for _, u := range us {
		p.AddCert(u.Certificate())
	}
	return p
}

type evlog struct {
	mu  sync.Mutex
	egs []egress.Event // guarded by mu
	crs []Event        // guarded by mu
}

func (l *evlog) egress(ev egress.Event) { l.mu.Lock(); l.egs = append(l.egs, ev); l.mu.Unlock() }
func (l *evlog) cred(ev Event)          { l.mu.Lock(); l.crs = append(l.crs, ev); l.mu.Unlock() }

// egresses returns the egress events so far: the proxy logs them from
// its own goroutines.
func (l *evlog) egresses() []egress.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]egress.Event(nil), l.egs...)
}

func (l *evlog) creds() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.crs...)
}

// find returns the credential events of kind.
func (l *evlog) find(kind string) []Event {
	var out []Event
	for _, e := range l.creds() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// rig is a proxy with a credential set, served on a unix socket.
type rig struct {
	set  *Set
	ca   *egress.CA
	sock string
	log  *evlog
	p    *egress.Proxy
}

func startRig(t testing.TB, roots *x509.CertPool, rules []egress.Rule, creds ...Credential) *rig {
	t.Helper()
	lg := &evlog{}
	set, err := New(Options{SandboxID: "sb1", Credentials: creds, Events: lg.cred})
	if err != nil {
		t.Fatal(err)
	}
	r := startRigLog(t, roots, rules, set, lg)
	r.set = set
	return r
}

// startRigInjector serves a proxy with inj (set left empty).
func startRigInjector(t testing.TB, roots *x509.CertPool, rules []egress.Rule, inj egress.Injector) *rig {
	t.Helper()
	return startRigLog(t, roots, rules, inj, &evlog{})
}

// startRigLog serves a proxy with inj whose events go to lg.
func startRigLog(t testing.TB, roots *x509.CertPool, rules []egress.Rule, inj egress.Injector, lg *evlog) *rig {
	t.Helper()
	ca, err := egress.NewCA("mcpbox test CA")
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Options{SandboxID: "sb1", Rules: rules, Injector: inj, CA: ca, RootCAs: roots, Log: lg.egress})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(waitFor):
			t.Error("Serve did not return after Close")
		}
	})
	return &rig{ca: ca, sock: sock, log: lg, p: p}
}

// client returns an HTTP client that goes through the proxy and trusts
// roots (nil: the proxy's CA alone); h2 asks for HTTP/2.
func (r *rig) client(t testing.TB, roots *x509.CertPool, h2 bool) *http.Client {
	t.Helper()
	if roots == nil {
		roots = x509.NewCertPool()
		roots.AddCert(r.ca.Certificate())
	}
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", r.sock)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitFor}
}

// do sends req and returns status and body.
func do(t testing.TB, c *http.Client, req *http.Request) (int, string, *http.Response) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body of %s: %v", req.URL, err)
	}
	return resp.StatusCode, string(b), resp
}

func newReq(t testing.TB, method, u string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
