package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBoundedBodies reads answers of the limit, one byte over, and an
// event stream over the limit, from a real HTTP server.
func TestBoundedBodies(t *testing.T) {
	const max = 64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := max
		switch r.URL.Path {
		case "/over":
			n = max + 1
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			n = 4 * max
		default:
			w.Header().Set("Content-Type", "application/json")
		}
		io.WriteString(w, strings.Repeat("x", n))
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: BoundedBodies(http.DefaultTransport, max, "server")}
	read := func(path string) (int, error) {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	if n, err := read("/exact"); err != nil || n != max {
		t.Errorf("an answer of exactly the limit: read %d bytes, %v", n, err)
	}
	if _, err := read("/over"); err == nil || !strings.Contains(err.Error(), "the server's answer is larger than 64 bytes") {
		t.Errorf("an answer one byte over the limit: %v, want the limit's error", err)
	}
	if n, err := read("/events"); err != nil || n != 4*max {
		t.Errorf("an event stream: read %d bytes, %v; want all %d (its reader bounds events)", n, err, 4*max)
	}
}
