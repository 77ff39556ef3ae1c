package oauth

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestNetClass(t *testing.T) {
	for addr, want := range map[string]netClass{
		"8.8.8.8": classPublic, "2001:4860:4860::8888": classPublic,
		"10.1.2.3": classPrivate, "172.16.0.1": classPrivate, "192.168.1.1": classPrivate,
		"100.64.0.1": classPrivate, "fd12::1": classPrivate,
		"169.254.169.254": classLinkLocal, "fe80::1": classLinkLocal, "0.0.0.0": classLinkLocal,
		"fd00:ec2::254": classLinkLocal,
		"127.0.0.1":     classLoopback, "127.9.9.9": classLoopback, "::1": classLoopback, "::ffff:127.0.0.1": classLoopback,
	} {
		if got := classOf(netip.MustParseAddr(addr)); got != want {
			t.Errorf("classOf(%s) = %v, want %v", addr, got, want)
		}
	}
}

// TestDialGuard: a flow anchored at a public server connects to no
// loopback, link-local (cloud metadata) or private address, whether a
// document names it by IP or by a name that resolves there; one anchored
// on the private network may use it but not metadata or loopback; a
// loopback anchor (local development, tests) may use everything.
func TestDialGuard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	public := guardedClient("https://93.184.216.34/mcp")
	public.Timeout = 5 * time.Second
	for _, u := range []string{
		srv.URL,                    // loopback by IP
		"http://localhost:" + port, // by a name that resolves into loopback
		"http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.1:9/", "http://[fd12::1]:9/",
	} {
		resp, err := public.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("public anchor reached %s", u)
		} else if !strings.Contains(err.Error(), "refusing to connect") {
			t.Errorf("public anchor, %s: %v, want refused by the guard", u, err)
		}
	}
	if resp, err := guardedClient("http://127.0.0.1:1/mcp").Get(srv.URL); err != nil {
		t.Errorf("loopback anchor: %v", err)
	} else {
		resp.Body.Close()
	}
	if resp, err := guardedClient("http://localhost:1/mcp").Get("http://localhost:" + port); err != nil {
		t.Errorf("localhost anchor: %v", err)
	} else {
		resp.Body.Close()
	}

	private := &dialGuard{anchor: "10.0.0.5"}
	for addr, ok := range map[string]bool{
		"10.9.9.9:443": true, "93.184.216.34:443": true,
		"169.254.169.254:80": false, "127.0.0.1:80": false, "[::1]:80": false,
	} {
		if err := private.control("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("private anchor, %s: %v, want allowed %v", addr, err, ok)
		}
	}
}

// TestDialGuardProxy: the environment's proxy is the user's and is
// dialed even on loopback.
func TestDialGuardProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
	t.Setenv("HTTP_PROXY", "")
	if p := envProxies(); !p["127.0.0.1:3128"] {
		t.Errorf("proxies %v, want 127.0.0.1:3128", p)
	}
}

// remoteConn is a connection whose peer is remote (the address a dial
// reached), without any traffic.
type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.remote }

// TestDialGuardAnchorListsLoopback: the anchor's name is the user's, its
// DNS answers are the remote server's. A name that lists a loopback (or
// link-local, private) address beside its public one does not widen the
// flow to loopback: the anchor's class is the lowest of its addresses.
func TestDialGuardAnchorListsLoopback(t *testing.T) {
	g := &dialGuard{anchor: "mcp.attacker.test", resolver: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")}, nil
	}}
	for addr, ok := range map[string]bool{
		"127.0.0.1:443": false, "169.254.169.254:80": false, "10.0.0.1:443": false, "93.184.216.34:443": true,
	} {
		if err := g.control("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", addr, err, ok)
		}
	}
}

// TestDialGuardAnchorRebinds: the anchor's class is that of the address
// the flow's first connection to it reached, not of a lookup of the
// guard's own, which a rebinding name answers with a loopback address
// (the dial's lookup got the public one).
func TestDialGuardAnchorRebinds(t *testing.T) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	g := &dialGuard{
		anchor: "mcp.attacker.test",
		resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		dial: func(context.Context, string, string) (net.Conn, error) {
			return remoteConn{a, &net.TCPAddr{IP: net.ParseIP("93.184.216.34"), Port: 443}}, nil
		},
	}
	// Another host first (a token endpoint): the lookup, lowest class.
	if err := g.control("tcp", "127.0.0.1:443", nil); err != nil {
		t.Fatalf("before any connection to the anchor, its lookup says loopback: %v", err)
	}
	c, err := g.dialContext(context.Background(), "tcp", "MCP.attacker.test.:443")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for addr, ok := range map[string]bool{"127.0.0.1:443": false, "169.254.169.254:80": false, "93.184.216.34:443": true} {
		if err := g.control("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("after the anchor was reached at a public address, %s: %v, want allowed %v", addr, err, ok)
		}
	}
}
