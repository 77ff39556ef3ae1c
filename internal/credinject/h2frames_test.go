package credinject

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Raw sends one request as hand-made HTTP/2 frames through the proxy to
// target: its header block is cut into a HEADERS frame and CONTINUATION
// frames of at most cut bytes. It returns the response :status.
func h2Raw(t *testing.T, r *rig, target string, headers [][2]string, cut int) string {
	t.Helper()
	c, err := net.DialTimeout("unix", r.sock, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
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
	b := block.Bytes()
	first := b[:min(cut, len(b))]
	rest := b[len(first):]
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: len(rest) == 0})
	for len(rest) > 0 {
		n := min(cut, len(rest))
		fr.WriteContinuation(1, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v", err)
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
					return hf.Value
				}
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	}
}

// TestH2ContinuationSmuggling: a placeholder cut across HEADERS and
// CONTINUATION frames is seen whole: refused towards another credential's
// host, left a placeholder in an unconfigured header of its own host.
func TestH2ContinuationSmuggling(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	req := func(u *upstream, extra ...[2]string) [][2]string {
		h := [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", u.hostPort()}, {":path", "/"}}
		return append(h, extra...)
	}
	if got := h2Raw(t, w.r, w.b.hostPort(), req(w.b, [2]string{"x-smuggle", "pre-" + ph}), 7); got != "403" {
		t.Errorf("A's placeholder split over CONTINUATION frames to B's host: status %s, want 403", got)
	}
	if n := len(w.b.requests()); n != 0 {
		t.Errorf("B received %d requests", n)
	}
	got := h2Raw(t, w.r, w.a.hostPort(), req(w.a, [2]string{"authorization", "Bearer " + ph}, [2]string{"x-smuggle", ph}), 5)
	if got != "200" {
		t.Fatalf("own host: status %s", got)
	}
	s := w.a.requests()[0]
	if s.Header.Get("X-Smuggle") != ph || strings.Count(fmt.Sprint(s.Header), realA) != 1 {
		t.Errorf("upstream headers %v: the value only in Authorization", s.Header)
	}
}
