package credinject

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"mcpbox/internal/egress"
)

// h2RawBody is h2Raw (one request as hand-made HTTP/2 frames through the
// proxy to target, the header block in one frame) returning the
// response's :status and its body.
func h2RawBody(t *testing.T, r *rig, target string, headers [][2]string) (string, string) {
	t.Helper()
	c, err := net.DialTimeout("unix", r.sock, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(r.ca.Certificate())
	tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("TLS: %v, ALPN %q", err, tc.ConnectionState().NegotiatedProtocol)
	}
	tc.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(tc, tc)
	fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, h := range headers {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	dec := hpack.NewDecoder(4096, nil)
	var status string
	var body bytes.Buffer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v (status %q, body so far %q)", err, status, body.String())
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					status = hf.Value
				}
			}
			if f.StreamEnded() {
				return status, body.String()
			}
		case *http2.DataFrame:
			body.Write(f.Data())
			if f.StreamEnded() {
				return status, body.String()
			}
		case *http2.RSTStreamFrame:
			return status, body.String()
		case *http2.GoAwayFrame:
			return status, body.String()
		}
	}
}

// TestOpaqueURLErrorLeaksNoValue: an HTTP/2 request whose :path is an
// absolute URI without "//" (https:x?key=PLACEHOLDER) parses as an
// opaque URL; the query parameter is substituted, and the upstream
// transport refuses the request with an error that quotes the whole
// :path, the real value in it. The refusal the workload reads, and the
// proxy's event, must not carry the value (in any of its usual forms).
func TestOpaqueURLErrorLeaksNoValue(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {})
	lg := &evlog{}
	set, err := New(Options{SandboxID: "sb1", Events: lg.cred, Credentials: []Credential{
		{Name: "Q", Value: realA, Hosts: []string{u.hostPort()}, Query: "key"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := startRigLog(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}}, set, lg)
	r.set = set
	ph, _ := set.Placeholder("Q")
	forms := []string{realA, url.QueryEscape(realA), base64.StdEncoding.EncodeToString([]byte(realA)), hex.EncodeToString([]byte(realA))}
	for _, path := range []string{"https:x?key=" + ph, "x:y?key=" + ph, "https:?key=" + ph} {
		status, body := h2RawBody(t, r, u.hostPort(), [][2]string{
			{":method", "GET"}, {":scheme", "https"}, {":authority", u.hostPort()}, {":path", path},
		})
		if status != "400" && !strings.HasPrefix(path, "https:?") { // that one is "/?key=..."
			t.Errorf(":path %q: status %s (%q), want 400: the target is not a path", path, status, body)
		}
		for _, f := range forms {
			if strings.Contains(body, f) {
				t.Errorf(":path %q: status %s, the response carries the real value: %q", path, status, body)
			}
		}
	}
	for _, ev := range lg.egresses() {
		for _, f := range forms {
			if strings.Contains(fmt.Sprint(ev), f) {
				t.Errorf("an egress event carries the real value: %+v", ev)
			}
		}
	}
	for _, s := range u.requests() {
		if !strings.HasPrefix(s.URI, "/") {
			t.Errorf("the upstream got a request for %q", s.URI)
		}
	}
}

// TestScrub: the proxy's refusal and failure reasons pass through Scrub,
// which must take out every form of a real value (the second wall behind
// the origin-form check above).
func TestScrub(t *testing.T) {
	set, err := New(Options{SandboxID: "sb1", Credentials: []Credential{
		{Name: "Q", Value: realA, Hosts: []string{"api.example.com"}, Query: "key"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{realA, url.QueryEscape(realA + "/+"), base64.StdEncoding.EncodeToString([]byte(realA)), hex.EncodeToString([]byte(realA))} {
		text := `http2: invalid request :path "x?key=` + f + `"`
		if got := set.Scrub(text); strings.Contains(got, f) || !strings.Contains(got, "invalid request") {
			t.Errorf("Scrub(%q) = %q", text, got)
		}
	}
	var empty Set
	if got := empty.Scrub("a text"); got != "a text" {
		t.Errorf("a Set without values changed a text: %q", got)
	}
}

// longValue is a credential value longer than the 64 bytes of a header
// value a refusal quotes: a cut copy of it would not be redacted whole.
const longValue = "sk-live-Q7vN2kXw9RtB4mLp8ZcY3hJd6FgS1aUe5WoI0qTnKbVx7MrCyHs2LfDg9PjA4ZwE"

// sharesPart reports whether text holds n or more bytes in a row of v.
func sharesPart(text, v string, n int) bool {
	for i := 0; i+n <= len(v); i++ {
		if strings.Contains(text, v[i:i+n]) {
			return true
		}
	}
	return false
}

// TestWebSocketRefusalQuotesNoValue: a listed host that echoes the
// handshake's Authorization into its 101's Upgrade or
// Sec-WebSocket-Extensions header is refused (502); the refusal, which
// quotes the header, must not carry the value, not even its first 64
// bytes (Scrub on the whole refusal cannot see a value cut short). It
// passed before Scrub too: the filter redacts the response header first.
func TestWebSocketRefusalQuotesNoValue(t *testing.T) {
	for _, header := range []string{"Upgrade", "Sec-WebSocket-Extensions"} {
		t.Run(header, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				echo := r.Header.Get("Authorization")
				conn, brw, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				up := "websocket"
				if header == "Upgrade" {
					up = echo
				}
				fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n", up)
				if header != "Upgrade" {
					fmt.Fprintf(brw, "%s: %s\r\n", header, echo)
				}
				brw.WriteString("\r\n")
				brw.Flush()
				conn.SetReadDeadline(time.Now().Add(waitFor))
				io.Copy(io.Discard, conn)
			}))
			srv.StartTLS()
			t.Cleanup(srv.Close)
			addr := srv.Listener.Addr().String()
			lg := &evlog{}
			set, err := New(Options{SandboxID: "sb1", Events: lg.cred, Credentials: []Credential{
				{Name: "K", Value: longValue, Hosts: []string{addr}, Header: "Authorization", Format: "{value}"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			_, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			r := startRigLog(t, roots, []egress.Rule{{Host: "127.0.0.1", Ports: []int{p}}}, set, lg)
			r.set = set
			ph, _ := set.Placeholder("K")
			tc := r.dialThrough(t, addr)
			fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", addr, ph)
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d %q, want 502", resp.StatusCode, body)
			}
			if sharesPart(string(body), longValue, 12) {
				t.Errorf("the refusal carries part of the value: %q", body)
			}
			for _, ev := range lg.egresses() {
				if sharesPart(fmt.Sprint(ev), longValue, 12) {
					t.Errorf("an egress event carries part of the value: %+v", ev)
				}
			}
		})
	}
}

// TestMalformedEchoLeaksNoValue: a listed host that answers with the
// request it got, not HTTP (an echo service), makes Go's HTTP/1.1
// transport fail with "malformed HTTP response" quoting that line, the
// filled-in query in it; the 502's text passes Scrub.
func TestMalformedEchoLeaksNoValue(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "%s %s\r\n\r\n", r.Method, r.RequestURI) // not a status line
		brw.Flush()
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	lg := &evlog{}
	set, err := New(Options{SandboxID: "sb1", Events: lg.cred, Credentials: []Credential{
		{Name: "Q", Value: realA, Hosts: []string{addr}, Query: "key"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	r := startRigLog(t, roots, []egress.Rule{{Host: "127.0.0.1", Ports: []int{p}}}, set, lg)
	r.set = set
	ph, _ := set.Placeholder("Q")
	req := newReq(t, "GET", "https://"+addr+"/x?key="+ph, nil)
	code, body, _ := do(t, r.client(t, nil, false), req)
	if code != http.StatusBadGateway {
		t.Errorf("status %d %q, want 502", code, body)
	}
	if strings.Contains(body, realA) {
		t.Errorf("the 502 carries the value: %q", body)
	}
	for _, ev := range lg.egresses() {
		if strings.Contains(fmt.Sprint(ev), realA) {
			t.Errorf("an egress event carries the value: %+v", ev)
		}
	}
}
