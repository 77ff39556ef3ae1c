package credinject

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// trailerReq is a POST whose body has no declared length (chunked under
// HTTP/1.1) and ends with trailer name: value.
func trailerReq(t *testing.T, url, name, value string) *http.Request {
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("part one;"))
		pw.Write([]byte("part two"))
		pw.Close()
	}()
	req := newReq(t, "POST", url, pr)
	req.Trailer = http.Header{name: {value}}
	return req
}

// TestTrailerPlaceholderRefused: a placeholder in a request trailer to a
// host not its credential's (a plain-HTTP host, another credential's
// intercepted host over HTTP/1.1 and HTTP/2) is refused and recorded as
// headers are, and the trailer never reaches the server.
func TestTrailerPlaceholderRefused(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	cases := []struct {
		name string
		url  string
		h2   bool
		srv  *upstream
	}{
		{"plain HTTP host", "http://" + w.p.hostPort() + "/up", false, w.p},
		{"B's host h1", "https://" + w.b.hostPort() + "/up", false, w.b},
		{"B's host h2", "https://" + w.b.hostPort() + "/up", true, w.b},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(w.r.log.find("exfiltration"))
			code, body, _ := do(t, w.r.client(t, nil, tc.h2), trailerReq(t, tc.url, "X-Sig", "v="+ph))
			if code != http.StatusForbidden || !strings.Contains(body, "placeholder of credential GH in the trailer X-Sig") {
				t.Errorf("status %d body %q, want 403 naming the trailer", code, body)
			}
			for _, s := range tc.srv.requests() {
				if strings.Contains(fmt.Sprint(s.Trailer, s.Header), ph) {
					t.Errorf("the server received the placeholder: trailer %v", s.Trailer)
				}
			}
			ex := w.r.log.find("exfiltration")
			if len(ex) != before+1 || ex[len(ex)-1].Credential != "GH" || ex[len(ex)-1].Where != "trailer X-Sig" {
				t.Errorf("exfiltration events %+v", ex)
			}
		})
	}
	if len(w.r.log.find("inject")) != 0 {
		t.Error("a value was injected")
	}
}

// TestTrailerSubstitution: trailers reach an intercepted host (HTTP/1.1
// and HTTP/2); the own placeholder in a trailer gets the value with
// any_header, as in a header, and stays a placeholder without it.
func TestTrailerSubstitution(t *testing.T) {
	for _, anyHeader := range []bool{false, true} {
		w := newWorld(t, func(c *Credential) { c.AnyHeader = anyHeader })
		ph := w.ph(t, "GH")
		for _, h2 := range []bool{false, true} {
			req := trailerReq(t, "https://"+w.a.hostPort()+"/up", "X-Sig", "v="+ph)
			req.Header.Set("Authorization", "Bearer "+ph)
			if code, body, _ := do(t, w.r.client(t, nil, h2), req); code != 200 {
				t.Fatalf("any_header=%v h2=%v: %d %s", anyHeader, h2, code, body)
			}
			got := w.a.requests()
			tr := got[len(got)-1].Trailer.Get("X-Sig")
			want := "v=" + ph
			if anyHeader {
				want = "v=" + realA
			}
			if tr != want {
				t.Errorf("any_header=%v h2=%v: trailer upstream %q, want %q", anyHeader, h2, tr, want)
			}
		}
		n := 0
		for _, e := range w.r.log.find("inject") {
			if e.Where == "trailer X-Sig" {
				n++
			}
		}
		if want := map[bool]int{false: 0, true: 2}[anyHeader]; n != want {
			t.Errorf("any_header=%v: %d trailer inject events, want %d", anyHeader, n, want)
		}
	}
}
