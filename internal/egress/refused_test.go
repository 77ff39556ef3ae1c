package egress

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestConnectRefusalSaysWhy: an HTTPS client reads a refused CONNECT's
// status line, not its body (Go's http.Transport makes the error of it),
// so the 403's reason phrase carries the refusal and RefusedHeader its
// kind: the client learns which host and why without the proxy's log.
func TestConnectRefusalSaysWhy(t *testing.T) {
	checkNoLeak(t)
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "*.example.com"}},
		Resolver: newResolver(map[string][]string{"loop.example.com": {"127.0.0.1"}}),
		Log:      ev.log,
	})
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: waitFor}
	for _, tt := range []struct{ url, reason string }{
		{"https://other.test/", "no rule allows other.test:443 (to allow it: network.egress: [{host: other.test}]"},
		// With how to open it: a rule for the name opens no private address.
		{"https://loop.example.com/", `loop.example.com resolves to blocked loopback address 127.0.0.1 (a rule for a name opens no private address; to allow it: network.egress: [{host: loop.example.com, cidr: "127.0.0.1/32"}]`},
	} {
		_, err := client.Get(tt.url)
		if err == nil || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("GET %s through the proxy: %v, want an error saying %q", tt.url, err, tt.reason)
		}
	}

	// The header names the kind; a target with control characters
	// cannot break the head: every header line stays printable.
	for _, tt := range []struct{ target, code string }{
		{"other.test:443", "no-rule"},
		{"loop.example.com:443", "blocked-address"},
		{"127.0.0.1:443", "no-rule"},
		{"evil\x1b[2J\rX-Injected: 1.test:443", "policy"},
	} {
		c, err := net.DialTimeout("unix", sock, waitFor)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * waitFor))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", tt.target)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			c.Close()
			// Go's parser refuses the request line itself: nothing to check.
			t.Logf("CONNECT %q: %v", tt.target, err)
			continue
		}
		c.Close()
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("CONNECT %q = %s, want 403", tt.target, resp.Status)
			continue
		}
		if resp.Header.Get("X-Injected") != "" {
			t.Errorf("CONNECT %q: the target injected a header: %v", tt.target, resp.Header)
		}
		if resp.StatusCode == http.StatusForbidden {
			if got := resp.Header.Get(RefusedHeader); got != tt.code {
				t.Errorf("CONNECT %q: %s %q, want %q (%s)", tt.target, RefusedHeader, got, tt.code, resp.Status)
			}
		}
		for _, r := range resp.Status {
			if r < 0x20 || r > 0x7e {
				t.Errorf("CONNECT %q: status line %q holds a control character", tt.target, resp.Status)
				break
			}
		}
	}
}
