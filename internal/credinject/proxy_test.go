package credinject

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

const (
	realA = "ghp_R3alT0kenAAAAbbbbCCCCddddEEEEffff1234"
	realB = "xoxb-1234567890-0987654321-REALslackTOKENvalue"
)

// requireToken answers 200 only to the real token, and echoes it back
// (a server that reflects what it got), to test response redaction.
func requireToken(want string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+want {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "hello; you sent %s; b64 %s", r.Header.Get("Authorization"),
			base64.StdEncoding.EncodeToString([]byte(want)))
	}
}

// world is two credential hosts (A, B), an allowed HTTPS host with no
// credential (C, tunnelled) and an allowed plain-HTTP host (P).
type world struct {
	a, b, c, p *upstream
	r          *rig
}

func newWorld(t *testing.T, extraA func(*Credential)) *world {
	w := &world{
		a: startUpstream(t, true, requireToken(realA)),
		b: startUpstream(t, true, requireToken(realB)),
		c: startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tunnelled") }),
		p: startUpstream(t, false, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain") }),
	}
	var rules []egress.Rule
	for _, u := range []*upstream{w.a, w.b, w.c, w.p} {
		rules = append(rules, egress.Rule{Host: "127.0.0.1", Ports: []int{u.port}})
	}
	ca := Credential{Name: "GH", Value: realA, Hosts: []string{w.a.hostPort()}, Header: "Authorization", Format: "Bearer {value}"}
	if extraA != nil {
		extraA(&ca)
	}
	cb := Credential{Name: "SLACK", Value: realB, Hosts: []string{w.b.hostPort()}, Header: "Authorization", Format: "Bearer {value}"}
	w.r = startRig(t, pool(w.a, w.b, w.c), rules, ca, cb)
	return w
}

func (w *world) ph(t *testing.T, name string) string {
	p, ok := w.r.set.Placeholder(name)
	if !ok {
		t.Fatalf("no placeholder for %s", name)
	}
	return p
}

func TestInjectHeaderHTTP1AndHTTP2(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			c := w.r.client(t, nil, h2)
			req := newReq(t, "GET", "https://"+w.a.hostPort()+"/user", nil)
			req.Header.Set("Authorization", "Bearer "+ph)
			code, body, resp := do(t, c, req)
			if code != 200 {
				t.Fatalf("status %d: %s", code, body)
			}
			if want := 1; h2 {
				want = 2
				if resp.ProtoMajor != want {
					t.Errorf("client side proto %d, want %d", resp.ProtoMajor, want)
				}
			}
			if strings.Contains(body, realA) || strings.Contains(body, base64.StdEncoding.EncodeToString([]byte(realA))) {
				t.Errorf("response carries the real value: %q", body)
			}
			if !strings.Contains(body, "[REDACTED:GH]") {
				t.Errorf("response not redacted as expected: %q", body)
			}
		})
	}
	got := w.a.requests()
	if len(got) != 2 || got[0].Header.Get("Authorization") != "Bearer "+realA {
		t.Fatalf("upstream saw %+v", got)
	}
	if got[0].Proto != 1 || got[1].Proto != 2 {
		t.Errorf("upstream protos for an h1 and an h2 client = %d, %d, want 1, 2 (the proxy speaks the client's protocol upstream)", got[0].Proto, got[1].Proto)
	}
	inj := w.r.log.find("inject")
	if len(inj) != 2 || inj[0].Credential != "GH" || inj[0].Where != "header Authorization" || inj[0].Host != "127.0.0.1" || inj[0].Port != w.a.port || inj[0].SandboxID != "sb1" {
		t.Errorf("inject events = %+v", inj)
	}
	for _, e := range w.r.log.creds() {
		if strings.Contains(fmt.Sprintf("%+v", e), realA) {
			t.Errorf("event carries the value: %+v", e)
		}
	}
}

// TestPlaceholderElsewhereRefused: A's placeholder to B's host (laundering),
// to a plain-HTTP host, and over plain HTTP to A's own host are refused,
// recorded, and never reach the server.
func TestPlaceholderElsewhereRefused(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	c := w.r.client(t, nil, false)
	cases := []struct {
		name string
		req  func() *http.Request
		srv  *upstream
	}{
		{"laundering to B's host", func() *http.Request {
			r := newReq(t, "GET", "https://"+w.b.hostPort()+"/", nil)
			r.Header.Set("Authorization", "Bearer "+ph)
			return r
		}, w.b},
		{"beside B's own placeholder", func() *http.Request {
			r := newReq(t, "GET", "https://"+w.b.hostPort()+"/", nil)
			r.Header.Set("Authorization", "Bearer "+w.ph(t, "SLACK"))
			r.Header.Set("X-Foo", ph)
			return r
		}, w.b},
		{"in B's URL", func() *http.Request {
			return newReq(t, "GET", "https://"+w.b.hostPort()+"/x?token="+url.QueryEscape(ph), nil)
		}, w.b},
		{"basic to B", func() *http.Request {
			r := newReq(t, "GET", "https://"+w.b.hostPort()+"/", nil)
			r.SetBasicAuth("x", ph)
			return r
		}, w.b},
		{"plain HTTP host", func() *http.Request {
			r := newReq(t, "GET", "http://"+w.p.hostPort()+"/", nil)
			r.Header.Set("X-Leak", ph)
			return r
		}, w.p},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.srv.requests())
			code, body, _ := do(t, c, tc.req())
			if code != http.StatusForbidden || !strings.Contains(body, "placeholder of credential GH") {
				t.Errorf("status %d body %q, want 403 naming the credential", code, body)
			}
			if n := len(tc.srv.requests()); n != before {
				t.Errorf("server received %d requests", n-before)
			}
		})
	}
	ex := w.r.log.find("exfiltration")
	if len(ex) != len(cases) {
		t.Fatalf("exfiltration events = %+v, want %d", ex, len(cases))
	}
	if ex[0].Credential != "GH" || ex[0].Port != w.b.port || strings.Contains(ex[0].Reason, ph) || strings.Contains(ex[0].Reason, realA) {
		t.Errorf("first exfiltration event = %+v", ex[0])
	}
	if len(w.r.log.find("inject")) != 0 {
		t.Error("a value was injected")
	}
}

// TestSmugglingGetsNoValue: the placeholder outside the configured header
// reaches A's own host as a placeholder; the real value is added only to
// Authorization.
func TestSmugglingGetsNoValue(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	c := w.r.client(t, nil, false)
	// Split across chunks: an unknown-length body is sent chunked, in
	// writes that cut the placeholder in two.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("a=1&t=" + ph[:7]))
		pw.Write([]byte(ph[7:] + "&z=" + ph))
		pw.Close()
	}()
	req := newReq(t, "POST", "https://"+w.a.hostPort()+"/p?q="+ph, pr)
	req.Header.Set("Authorization", "Bearer "+ph)
	req.Header.Set("X-Other", "token "+ph)
	if code, body, _ := do(t, c, req); code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	got := w.a.requests()[0]
	if got.Header.Get("X-Other") != "token "+ph || !strings.Contains(got.URI, ph) || string(got.Body) != "a=1&t="+ph+"&z="+ph {
		t.Errorf("placeholder not left as is outside Authorization: %+v body %q", got.Header, got.Body)
	}
	all := fmt.Sprintf("%v %s %s", got.Header, got.URI, got.Body)
	if strings.Count(all, realA) != 1 {
		t.Errorf("real value appears %d times upstream, want once (Authorization)", strings.Count(all, realA))
	}
}

func TestBodySubstitutionFraming(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Len", fmt.Sprint(r.ContentLength))
		io.WriteString(w, "ok")
	}
	a := startUpstream(t, true, echo)
	b := startUpstream(t, true, echo)
	ca := Credential{Name: "API", Value: realA, Hosts: []string{a.hostPort()}, Body: true}
	cb := Credential{Name: "OTHER", Value: realB, Hosts: []string{b.hostPort()}, Header: "X-Key"}
	r := startRig(t, pool(a, b), []egress.Rule{{Host: "127.0.0.1", Ports: []int{a.port, b.port}}}, ca, cb)
	ph, _ := r.set.Placeholder("API")
	for _, h2 := range []bool{false, true} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("h2=%v/chunked=%v", h2, chunked), func(t *testing.T) {
				c := r.client(t, nil, h2)
				payload := `{"key":"` + ph + `","again":"` + ph + `"}`
				var body io.Reader = strings.NewReader(payload)
				if chunked {
					pr, pw := io.Pipe()
					go func() {
						for i := 0; i < len(payload); i += 5 {
							pw.Write([]byte(payload[i:min(i+5, len(payload))]))
						}
						pw.Close()
					}()
					body = pr
				}
				n := len(a.requests())
				code, txt, _ := do(t, c, newReq(t, "POST", "https://"+a.hostPort()+"/", body))
				if code != 200 {
					t.Fatalf("status %d: %s", code, txt)
				}
				got := a.requests()[n]
				want := `{"key":"` + realA + `","again":"` + realA + `"}`
				if string(got.Body) != want {
					t.Errorf("upstream body %q, want %q", got.Body, want)
				}
				if cl := got.Header.Get("Content-Length"); !chunked && cl != fmt.Sprint(len(want)) {
					t.Errorf("Content-Length %q, want %d", cl, len(want))
				}
			})
		}
	}
	// The other credential's placeholder in a body to API's host is
	// refused mid-stream, split across writes; the upstream never gets it.
	phB, _ := r.set.Placeholder("OTHER")
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("x=" + phB[:9]))
		pw.Write([]byte(phB[9:]))
		pw.Close()
	}()
	n := len(a.requests())
	code, txt, _ := do(t, r.client(t, nil, false), newReq(t, "POST", "https://"+a.hostPort()+"/", pr))
	if code != http.StatusForbidden || !strings.Contains(txt, "placeholder of credential OTHER in the body") {
		t.Errorf("laundering in a body: status %d %q", code, txt)
	}
	for _, s := range a.requests()[n:] {
		if strings.Contains(string(s.Body), phB[:9]+phB[9:]) {
			t.Error("the placeholder reached the upstream")
		}
	}
}

func TestQueryAndBasic(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		_, pass, _ := r.BasicAuth()
		if r.URL.Query().Get("key") != realA || pass != realB {
			http.Error(w, "no", http.StatusUnauthorized)
		}
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "Q", Value: realA, Hosts: []string{u.hostPort()}, Query: "key"},
		Credential{Name: "B", Value: realB, Hosts: []string{u.hostPort()}, Basic: true})
	pq, _ := r.set.Placeholder("Q")
	pb, _ := r.set.Placeholder("B")
	req := newReq(t, "GET", "https://"+u.hostPort()+"/x?a=1&key="+pq+"&b=2", nil)
	req.SetBasicAuth("user", pb)
	if code, body, _ := do(t, r.client(t, nil, false), req); code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	if got := u.requests()[0].URI; got != "/x?a=1&key="+realA+"&b=2" {
		t.Errorf("URI %q: other parameters must stay in place", got)
	}
}

func TestUpstreamBadCertificateRefused(t *testing.T) {
	a := startUpstream(t, true, requireToken(realA))
	// The root pool lacks a's certificate: the proxy must not talk to it.
	r := startRig(t, x509.NewCertPool(), []egress.Rule{{Host: "127.0.0.1", Ports: []int{a.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{a.hostPort()}, Header: "Authorization", Format: "Bearer {value}"})
	ph, _ := r.set.Placeholder("GH")
	req := newReq(t, "GET", "https://"+a.hostPort()+"/", nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	code, body, _ := do(t, r.client(t, nil, false), req)
	if code != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Errorf("status %d %q, want 502 naming the certificate", code, body)
	}
	if len(a.requests()) != 0 {
		t.Error("the request reached an unverified upstream")
	}
}

// TestUnlistedHostTunnelled: a host no credential lists keeps an opaque
// tunnel: a client pinning the server's own certificate works, one that
// trusts only the proxy's CA fails.
func TestUnlistedHostTunnelled(t *testing.T) {
	w := newWorld(t, nil)
	pinned := x509.NewCertPool()
	pinned.AddCert(w.c.Certificate())
	code, body, _ := do(t, w.r.client(t, pinned, true), newReq(t, "GET", "https://"+w.c.hostPort()+"/", nil))
	if code != 200 || body != "tunnelled" {
		t.Errorf("pinned client: %d %q", code, body)
	}
	_, err := w.r.client(t, nil, false).Get("https://" + w.c.hostPort() + "/")
	if err == nil {
		t.Error("a client trusting only the proxy CA reached an unlisted host: it was intercepted")
	}
	// And a listed host is intercepted: the pinned client refuses it.
	pinnedA := x509.NewCertPool()
	pinnedA.AddCert(w.a.Certificate())
	if _, err := w.r.client(t, pinnedA, false).Get("https://" + w.a.hostPort() + "/"); err == nil {
		t.Error("a listed host was not intercepted")
	}
}

// TestHostHeaderMustMatch: a request inside an intercepted tunnel that
// names another host (domain fronting) is refused.
func TestHostHeaderMustMatch(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	tr := w.r.client(t, nil, false).Transport.(*http.Transport)
	tr.TLSClientConfig.ServerName = "127.0.0.1"
	req := newReq(t, "GET", "https://"+w.a.hostPort()+"/", nil)
	req.Host = "evil.example.com"
	req.Header.Set("Authorization", "Bearer "+ph)
	code, body, _ := do(t, &http.Client{Transport: tr}, req)
	if code != http.StatusForbidden || !strings.Contains(body, "does not match") {
		t.Errorf("status %d %q", code, body)
	}
	if len(w.a.requests()) != 0 {
		t.Error("the fronted request reached the upstream")
	}
}

// TestCompressedResponseRefused: a response the scan cannot read is
// refused, whatever lines its codings come on, and a listed host is asked
// for identity whatever the sandbox asked for.
func TestCompressedResponseRefused(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "identity" {
			http.Error(w, "accept-encoding "+r.Header.Get("Accept-Encoding"), 400)
			return
		}
		switch r.URL.Path {
		case "/lines": // identity first, so that Header.Get sees only it
			w.Header()["Content-Encoding"] = []string{"identity", "gzip"}
		case "/list":
			w.Header().Set("Content-Encoding", "identity, gzip")
		default:
			w.Header().Set("Content-Encoding", "gzip")
		}
		w.Write([]byte{0x1f, 0x8b})
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{u.hostPort()}, Header: "Authorization"},
		Credential{Name: "Q", Value: realB, Hosts: []string{u.hostPort()}, Query: "key"})
	ph, _ := r.set.Placeholder("Q")
	for _, path := range []string{"/", "/lines", "/list"} {
		req := newReq(t, "GET", "https://"+u.hostPort()+path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		code, body, _ := do(t, r.client(t, nil, false), req)
		if code != http.StatusBadGateway || !strings.Contains(body, `content coding "gzip"`) {
			t.Errorf("%s: status %d %q", path, code, body)
		}
	}
	// The sandbox's own Authorization (the secret goes in the query)
	// naming accept-encoding is no SigV4 signature over it.
	req := newReq(t, "GET", "https://"+u.hostPort()+"/?key="+ph, nil)
	req.Header.Set("Authorization", "x accept-encoding")
	req.Header.Set("Accept-Encoding", "gzip")
	if code, body, _ := do(t, r.client(t, nil, false), req); code != http.StatusBadGateway || !strings.Contains(body, `content coding "gzip"`) {
		t.Errorf("sandbox's Accept-Encoding kept: status %d %q", code, body)
	}
}

// A listed host that echoes the value the way other JSON writers escape
// it (PHP's \/, .NET's \u002B, Gson's \u003d) gets it redacted as well
// as encoding/json's form.
func TestEscapedEchoOfValueRedacted(t *testing.T) {
	const value = "Ab3/Xy9+Qw7zLm4/Pk8tRt5sNv2Hq6Dc=="
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch r.URL.Path {
		case "/php":
			tok = strings.ReplaceAll(tok, "/", `\/`)
		case "/dotnet":
			tok = strings.ReplaceAll(tok, "+", `\u002B`)
		case "/gson":
			tok = strings.ReplaceAll(tok, "=", `\u003d`)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"error":"invalid token","token":"%s"}`, tok)
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "API", Value: value, Hosts: []string{u.hostPort()}, Header: "Authorization", Format: "Bearer {value}"})
	ph, _ := r.set.Placeholder("API")
	c := r.client(t, nil, false)
	for _, path := range []string{"/php", "/dotnet", "/gson"} {
		req := newReq(t, "GET", "https://"+u.hostPort()+path, nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		code, body, _ := do(t, c, req)
		if code != 200 || body != `{"error":"invalid token","token":"[REDACTED:API]"}` {
			t.Errorf("%s: status %d %q", path, code, body)
		}
	}
}

// A listed host that echoes the value cut short at the end of its
// answer (an error quoting the first N bytes of a header) handed out the
// value's beginning, as long as the sandbox liked: held back as what may
// begin a form, it was sent as it was at the end. Past a few bytes it is
// the mark now; a few bytes still pass.
func TestTruncatedEchoAtEndRedacted(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		fmt.Fprintf(w, "bad header: %s", r.Header.Get("Authorization")[:n])
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{u.hostPort()}, Header: "Authorization"})
	ph, _ := r.set.Placeholder("GH")
	c := r.client(t, nil, false)
	for _, tc := range []struct {
		n    int
		want string
	}{
		{31, "bad header: [REDACTED:GH]"},
		{12, "bad header: [REDACTED:GH]"},
		{5, "bad header: " + realA[:5]},
	} {
		req := newReq(t, "GET", fmt.Sprintf("https://%s/?n=%d", u.hostPort(), tc.n), nil)
		req.Header.Set("Authorization", ph)
		if code, body, _ := do(t, c, req); code != 200 || body != tc.want {
			t.Errorf("echo cut to %d bytes: status %d %q, want %q", tc.n, code, body, tc.want)
		}
	}
}

// A listed host that stores or quotes the value and shows it cut short,
// without its start, or a slice of it, anywhere in its answer (a list of
// titles cut to 40 characters): before, only a cut at the very end of the
// body was caught, and the sandbox read the value but for a few guessable
// bytes. A run of at least a quarter of the value's secret bytes is the
// mark now, in the body and the headers; a shorter one passes.
func TestCutEchoAnywhereRedacted(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		a, _ := strconv.Atoi(q.Get("a"))
		b, _ := strconv.Atoi(q.Get("b"))
		tok := r.Header.Get("Authorization")[a:b]
		w.Header().Set("X-Echo", tok)
		w.Header().Set("X-"+tok, "in the name") // re-cased on the way
		fmt.Fprintf(w, `[{"title":"%s","state":"open"}]`, tok)
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{u.hostPort()}, Header: "Authorization"})
	ph, _ := r.set.Placeholder("GH")
	c := r.client(t, nil, false)
	// realA is ghp_ (the placeholder's too) and 37 secret bytes: runs of
	// 10 or more of them are the mark, whatever bytes the random
	// placeholder happens to share with it.
	for _, tc := range []struct {
		a, b   int
		marked bool
	}{
		{4, len(realA), true}, // the start dropped
		{0, 30, true},         // cut short
		{10, 25, true},        // a middle slice
		{10, 20, true},
		{10, 19, false},
		{0, 13, false}, // ghp_ and 9 secret bytes
		{0, 14, true},
	} {
		req := newReq(t, "GET", fmt.Sprintf("https://%s/?a=%d&b=%d", u.hostPort(), tc.a, tc.b), nil)
		req.Header.Set("Authorization", ph)
		code, body, resp := do(t, c, req)
		hdr := resp.Header
		want := `[{"title":"` + realA[tc.a:tc.b] + `","state":"open"}]`
		wantHdr := realA[tc.a:tc.b]
		if tc.marked {
			want, wantHdr = `[{"title":"[REDACTED:GH]","state":"open"}]`, "[REDACTED:GH]"
		}
		if code != 200 || body != want || hdr.Get("X-Echo") != wantHdr {
			t.Errorf("echo of value[%d:%d]: status %d %q, X-Echo %q; want %q, %q", tc.a, tc.b, code, body, hdr.Get("X-Echo"), want, wantHdr)
		}
		if named := hdr.Get("X-"+realA[tc.a:tc.b]) != ""; named == tc.marked {
			t.Errorf("echo of value[%d:%d] in a header name: kept %v, want %v", tc.a, tc.b, named, !tc.marked)
		}
	}
}

// A listed host that echoes the request and honours Range (here
// http.ServeContent) would hand the sandbox the injected value a few
// bytes at a time, each part too short for the scan to know. The proxy
// asks for the whole response, which is redacted; a part the server
// sends anyway is refused.
func TestRangeOfEchoedValueRefused(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/always-partial" {
			w.Header().Set("Content-Range", "bytes 0-3/40")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte(r.Header.Get("Authorization")[:4]))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		http.ServeContent(w, r, "echo", time.Time{}, strings.NewReader("you sent "+r.Header.Get("Authorization")))
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{u.hostPort()}, Header: "Authorization"})
	ph, _ := r.set.Placeholder("GH")
	c := r.client(t, nil, false)
	var parts strings.Builder
	for from := 0; from < len("you sent ")+len(realA); from += 8 {
		req := newReq(t, "GET", "https://"+u.hostPort()+"/", nil)
		req.Header.Set("Authorization", ph)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", from, from+7))
		if from == 0 {
			req.Header.Set("If-Range", `"any"`)
		}
		code, body, _ := do(t, c, req)
		if code != http.StatusOK || body != "you sent [REDACTED:GH]" {
			t.Fatalf("range from %d: status %d %q, want the whole echo, redacted", from, code, body)
		}
		parts.WriteString(body)
	}
	for _, seen := range u.requests() {
		if seen.Header.Get("Range") != "" || seen.Header.Get("If-Range") != "" {
			t.Errorf("the server was asked for a range: %v", seen.Header)
		}
	}
	req := newReq(t, "GET", "https://"+u.hostPort()+"/always-partial", nil)
	req.Header.Set("Authorization", ph)
	if code, body, _ := do(t, c, req); code != http.StatusBadGateway || !strings.Contains(body, "(206)") || strings.Contains(body, realA[:4]) {
		t.Errorf("a part sent unasked: status %d %q, want 502", code, body)
	}
	if strings.Contains(parts.String(), realA[:8]) {
		t.Errorf("the value came through: %q", parts.String())
	}
}

func TestIntercepts(t *testing.T) {
	s, err := New(Options{Credentials: []Credential{
		{Name: "A", Value: realA, Hosts: []string{"api.github.com", "*.example.com", "127.0.0.1:8443", "[::1]:9443"}, Header: "Authorization"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"api.github.com", 443, true}, {"api.github.com", 80, false}, {"github.com", 443, false},
		{"a.example.com", 443, true}, {"example.com", 443, false}, {"evilexample.com", 443, false},
		{"127.0.0.1", 8443, true}, {"127.0.0.1", 443, false}, {"::1", 9443, true},
	} {
		if got := s.Intercepts(tc.host, tc.port); got != tc.want {
			t.Errorf("Intercepts(%s, %d) = %v", tc.host, tc.port, got)
		}
	}
	_ = tls.VersionTLS13
}

// TestResponseTrailersAndHeadersRedacted: a server that reflects the token
// in a response header and a trailer does not hand it to the sandbox.
func TestResponseTrailersAndHeadersRedacted(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		// The value in names too, which are re-cased on the way.
		w.Header().Set("Trailer", "X-Echo-Trailer, X-T-"+r.Header.Get("Authorization"))
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("X-"+r.Header.Get("Authorization"), "1")
		// Split across writes and flushes: the stream redactor holds it.
		tok := r.Header.Get("Authorization")
		io.WriteString(w, "a"+tok[:10])
		w.(http.Flusher).Flush()
		io.WriteString(w, tok[10:]+"z")
		w.Header().Set("X-Echo-Trailer", tok)
		w.Header().Set("X-T-"+tok, "1")
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{u.hostPort()}, Header: "Authorization"})
	ph, _ := r.set.Placeholder("GH")
	for _, h2 := range []bool{false, true} {
		req := newReq(t, "GET", "https://"+u.hostPort()+"/", nil)
		req.Header.Set("Authorization", ph)
		code, body, resp := do(t, r.client(t, nil, h2), req)
		all := strings.ToLower(fmt.Sprint(resp.Header, resp.Trailer, body))
		if code != 200 || strings.Contains(all, strings.ToLower(realA)) || body != "a[REDACTED:GH]z" ||
			resp.Header.Get("X-Echo") != "[REDACTED:GH]" || resp.Trailer.Get("X-Echo-Trailer") != "[REDACTED:GH]" {
			t.Errorf("h2=%v: %d header %v trailer %v body %q", h2, code, resp.Header, resp.Trailer, body)
		}
	}
}

func TestPlaceholderAsHeaderNameRefused(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	req := newReq(t, "GET", "https://"+w.b.hostPort()+"/", nil)
	req.Header.Set("X-"+ph, "1")
	if code, body, _ := do(t, w.r.client(t, nil, false), req); code != 403 {
		t.Errorf("%d %q", code, body)
	}
}

// TestPlainHTTPBodyRefused: a placeholder in the body of a plain-HTTP
// request is refused mid-stream and never reaches the server.
func TestPlainHTTPBodyRefused(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "SLACK")
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(strings.Repeat("x", 100) + ph[:5]))
		pw.Write([]byte(ph[5:] + "tail"))
		pw.Close()
	}()
	code, body, _ := do(t, w.r.client(t, nil, false), newReq(t, "POST", "http://"+w.p.hostPort()+"/upload", pr))
	if code != http.StatusForbidden || !strings.Contains(body, "placeholder of credential SLACK in the body") {
		t.Errorf("%d %q", code, body)
	}
	for _, s := range w.p.requests() {
		if strings.Contains(string(s.Body), ph) {
			t.Error("the placeholder reached the plain-HTTP server")
		}
	}
	if ex := w.r.log.find("exfiltration"); len(ex) != 1 || ex[0].Credential != "SLACK" || ex[0].Where != "body" {
		t.Errorf("events %+v", ex)
	}
}

// TestPlaceholderToUnallowedHostNeverLeaves: a host the policy does not
// allow is refused at CONNECT, before a byte of the request is sent.
func TestPlaceholderToUnallowedHostNeverLeaves(t *testing.T) {
	w := newWorld(t, nil)
	other := startUpstream(t, true, func(http.ResponseWriter, *http.Request) {})
	req := newReq(t, "GET", "https://"+other.hostPort()+"/", nil)
	req.Header.Set("Authorization", "Bearer "+w.ph(t, "GH"))
	if _, err := w.r.client(t, pool(other), false).Do(req); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("request to an unallowed host: %v", err)
	}
	if len(other.requests()) != 0 {
		t.Error("the unallowed host received the request")
	}
}

// TestConcurrentStreams: many HTTP/2 streams on one intercepted connection,
// substituted and refused ones interleaved, each get their own answer.
func TestConcurrentStreams(t *testing.T) {
	w := newWorld(t, nil)
	phA, phB := w.ph(t, "GH"), w.ph(t, "SLACK")
	c := w.r.client(t, nil, true)
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				ph, want := phA, 200
				if (g+i)%2 == 1 {
					ph, want = phB, 403 // B's placeholder to A's host
				}
				req, _ := http.NewRequest("POST", "https://"+w.a.hostPort()+"/", strings.NewReader("body "+ph))
				req.Header.Set("Authorization", "Bearer "+phA)
				resp, err := c.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want || resp.ProtoMajor != 2 {
					errs <- fmt.Sprintf("stream %d/%d: %d %s, want %d", g, i, resp.StatusCode, resp.Proto, want)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, s := range w.a.requests() {
		if strings.Contains(string(s.Body), phB) {
			t.Fatal("B's placeholder reached A's host")
		}
	}
	if n := len(w.a.requests()); n != 50 {
		t.Errorf("A served %d requests, want 50", n)
	}
}

// TestStreamingResponseNotHeldBack: server-sent events from a credential's
// host reach the client as they are sent; only bytes that may begin a
// form of a value (a letter or digit, with the line breaks after it) wait
// for the next ones, and a JSON event ends in "}".
func TestStreamingResponseNotHeldBack(t *testing.T) {
	next := make(chan struct{})
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-time.After(waitFor):
		}
		io.WriteString(w, "data: second\n\n")
	})
	// A value with line breaks (a PEM key) in the set: the event's closing
	// blank line is the sandbox's to know, and not held back either.
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{u.hostPort()}, Header: "Authorization"},
		Credential{Name: "KEY", Value: "-----BEGIN KEY-----\nMIIEowIBAAKCAQEAx0123456789abcdefghij\n-----END KEY-----\n", Hosts: []string{u.hostPort()}, Body: true})
	for _, h2 := range []bool{false, true} {
		resp, err := r.client(t, nil, h2).Get("https://" + u.hostPort() + "/events")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			br := bufio.NewReader(resp.Body)
			line, _ := br.ReadString('\n')
			blank, _ := br.ReadString('\n')
			got <- line + blank
		}()
		select {
		case line := <-got:
			if line != "data: {\"n\":1}\n\n" {
				t.Errorf("h2=%v: first event %q", h2, line)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("h2=%v: the first event was held back", h2)
		}
		next <- struct{}{}
		resp.Body.Close()
	}
}

// TestStreamingRequestNotHeldBack: a client streaming messages in a
// request body (HTTP/2, full duplex) to a credential's host is not
// stalled: each message reaches the server before the next is written.
func TestStreamingRequestNotHeldBack(t *testing.T) {
	u := startUpstreamRaw(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(w, "ack:"+line)
			w.(http.Flusher).Flush()
		}
	})
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{u.hostPort()}, Header: "Authorization", Body: true})
	ph, _ := r.set.Placeholder("GH")
	pr, pw := io.Pipe()
	defer pw.Close()
	resp, err := r.client(t, nil, true).Post("https://"+u.hostPort()+"/stream", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for _, msg := range []string{"hello\n", "key " + ph + "\n", "bye\n"} {
		go pw.Write([]byte(msg))
		got := make(chan string, 1)
		go func() { line, _ := br.ReadString('\n'); got <- line }()
		want := "ack:" + strings.ReplaceAll(msg, ph, "[REDACTED:GH]")
		select {
		case line := <-got:
			if line != want {
				t.Errorf("got %q, want %q", line, want)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("message %q held back", msg)
		}
	}
}

// startUpstreamRaw is startUpstream without the recorder, whose reading
// of the whole body would defeat streaming.
func startUpstreamRaw(t testing.TB, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{Server: httptest.NewUnstartedServer(h)}
	u.Config.ErrorLog = log.New(io.Discard, "", 0)
	u.EnableHTTP2 = true
	u.StartTLS()
	t.Cleanup(u.Close)
	u.port = u.Listener.Addr().(*net.TCPAddr).Port
	return u
}
