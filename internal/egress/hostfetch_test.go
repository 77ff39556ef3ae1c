package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeDNS answers every A question with the address answer() returns at
// that moment, on a loopback UDP port; the resolver it returns asks it and
// nothing else.
func fakeDNS(t *testing.T, answer func() netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if a := answer(); q.Type == dnsmessage.TypeA && a.Is4() {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: a.As4()})
			}
			msg, err := b.Finish()
			if err == nil {
				pc.WriteTo(msg, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// internalService stands in for what a private address reaches from the
// host (cloud metadata, a loopback service); it counts its requests.
func internalService(t *testing.T) (port string, hits *atomic.Int64) {
	hits = new(atomic.Int64)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "instance-id\n")
	}))
	t.Cleanup(s.Close)
	_, port, _ = net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	return port, hits
}

// TestHostFetchRefusesNamesResolvingInside: a name whose DNS answer is a
// loopback address (as an attacker's name would answer 169.254.169.254) is
// refused at the connection, also when the name first answered a public
// address (DNS rebinding: the check is on the address dialed, not on an
// earlier lookup). A trusted host:port (a configured registry) is dialed
// whatever it resolves to.
func TestHostFetchRefusesNamesResolvingInside(t *testing.T) {
	port, hits := internalService(t)
	port2, hits2 := internalService(t)
	var lookups atomic.Int64
	res := fakeDNS(t, func() netip.Addr {
		lookups.Add(1)
		return netip.MustParseAddr("127.0.0.1")
	})
	h := &HostFetch{Resolver: res, Trusted: []string{"Registry.Test:" + port}}
	c := &http.Client{Transport: h.Transport(), Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	get := func(u string) error {
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	for _, u := range []string{
		"http://metadata.attacker.test:" + port + "/latest/meta-data/",
		"http://registry.test.:" + port + "/", // another spelling of a trusted name is not trusted
		"http://registry.test:" + port2 + "/", // nor another port
	} {
		if err := get(u); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("GET %s: %v, want %v", u, err, ErrPrivateAddress)
		}
	}
	if lookups.Load() == 0 {
		t.Fatal("the fake resolver was never asked")
	}
	if n := hits.Load() + hits2.Load(); n != 0 {
		t.Fatalf("the internal services got %d requests", n)
	}
	if err := get("http://registry.test:" + port + "/"); err != nil {
		t.Errorf("the trusted registry (its name case-folded): %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the trusted registry got %d requests, want 1", n)
	}
}

// TestHostFetchRefusesRedirectInside: a public-looking first hop that
// redirects to a loopback address does not get it fetched.
func TestHostFetchRefusesRedirectInside(t *testing.T) {
	port, hits := internalService(t)
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://[::ffff:127.0.0.1]:"+port+"/x.tgz", http.StatusFound)
	}))
	t.Cleanup(reg.Close)
	h := &HostFetch{Trusted: []string{strings.TrimPrefix(reg.URL, "http://")}}
	c := &http.Client{Transport: h.Transport(), Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	resp, err := c.Get(reg.URL + "/x.tgz")
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("GET through a redirect: %v, want %v", err, ErrPrivateAddress)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests", n)
	}
}

// TestCheckDialed: every spelling of a non-public address the dialer may
// be handed is refused, public ones pass. (Checked without dialing: the
// test sends nothing to addresses off this host.)
func TestCheckDialed(t *testing.T) {
	for _, a := range []string{
		"127.0.0.1:80", "127.1.2.3:80", "[::1]:80", "169.254.169.254:80", "[::ffff:169.254.169.254]:80",
		"[::ffff:7f00:1]:80", "10.1.2.3:443", "172.16.0.1:443", "192.168.1.1:443", "[fd00::1]:443",
		"[fe80::1%lo]:80", "0.0.0.0:80", "[::]:80", "100.64.0.1:80", "[64:ff9b::a9fe:a9fe]:80",
		"[2002:a9fe:a9fe::1]:80", "[::a9fe:a9fe]:80", "not an address",
	} {
		if err := checkDialed("x", a); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("%s: %v, want a refusal", a, err)
		}
	}
	for _, a := range []string{"93.184.215.14:443", "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443", "203.0.113.7:443"} {
		if err := checkDialed("x", a); err != nil {
			t.Errorf("%s: %v, want it allowed", a, err)
		}
	}
}

// TestHostFetchProxyTrusted: the environment's proxy, the user's, is
// dialed though it is on loopback; a target address behind it is still
// checked.
func TestHostFetchProxyTrusted(t *testing.T) {
	var hits atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "via proxy")
	}))
	t.Cleanup(proxy.Close)
	h := &HostFetch{}
	tr := h.Transport()
	tr.Proxy = wrapEnvProxy(h, func(*http.Request) (*url.URL, error) { return url.Parse(proxy.URL) })
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	resp, err := c.Get("http://packages.example/x.tgz")
	if err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	resp.Body.Close()
	if _, err := c.Get("http://169.254.169.254/latest/meta-data/"); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("an address behind the proxy: %v, want %v", err, ErrPrivateAddress)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the proxy got %d requests, want 1", n)
	}
}

// TestHostFetchRefusesThisHost: an address of this host, or on one of
// its interfaces' networks, is refused whatever its range (a public
// address reaches every service the host binds to 0.0.0.0), as the
// proxy refuses it; other public addresses are not. Pure: the
// interfaces are given, nothing is dialed.
func TestHostFetchRefusesThisHost(t *testing.T) {
	h := &HostFetch{}
	h.local.list = func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("198.51.100.7"), Mask: net.CIDRMask(28, 32)},
			&net.IPNet{IP: net.ParseIP("2001:db8:5::7"), Mask: net.CIDRMask(64, 128)},
		}, nil
	}
	for _, a := range []string{"198.51.100.7:22", "198.51.100.1:80", "[::ffff:198.51.100.7]:80", "[2001:db8:5::7]:443", "[2001:db8:5::1]:80"} {
		if err := h.check("registry.example:443", a); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("%s: %v, want a refusal", a, err)
		}
	}
	for _, a := range []string{"198.51.100.77:443", "[2001:db8:6::1]:443", "93.184.215.14:443"} {
		if err := h.check("registry.example:443", a); err != nil {
			t.Errorf("%s: %v, want it allowed", a, err)
		}
	}
}
