package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestConnectAllowedAndLogged(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	_, sock := startProxy(t, Options{
		SandboxID: "sb1",
		Rules:     []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Log:       ev.log,
	})
	c, code, body := connect(t, sock, fmt.Sprintf("127.0.0.1:%d", port))
	if code != http.StatusOK {
		t.Fatalf("CONNECT = %d %s", code, body)
	}
	echoOnce(t, c, "hello through the proxy")
	c.Close()
	e := ev.next(t)
	want := Event{SandboxID: "sb1", Kind: "connect", Host: "127.0.0.1", Port: port, IP: netip.MustParseAddr("127.0.0.1"),
		Decision: "allow", Rule: fmt.Sprintf("127.0.0.1:%d", port), BytesUp: 23, BytesDown: 23}
	got := e
	got.Time, got.Duration = time.Time{}, 0
	if got != want {
		t.Errorf("event = %+v\nwant    %+v", got, want)
	}
	if e.Time.IsZero() || e.Duration <= 0 {
		t.Errorf("event lacks time or duration: %+v", e)
	}
}

// TestAttacks: every path to an internal address is refused with 403, a
// reason and a deny event, and nothing is dialed.
func TestAttacks(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	other := startEcho(t, "127.0.0.1:0")
	res := newResolver(map[string][]string{
		"internal.example.com":     {"10.1.2.3"},
		"loop.example.com":         {"127.0.0.1"},
		"mixed.example.com":        {"93.184.215.14", "::1"},
		"meta.example.com":         {"169.254.169.254"},
		"mapped.example.com":       {"::ffff:127.0.0.1"},
		"metadata.google.internal": {"8.8.8.8"},
	})
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules: []Rule{
			{Host: "127.0.0.1", Ports: []int{port}},
			{Host: "*.example.com", Ports: []int{port, 80, 443}},
			{Host: "*", Ports: []int{443, 80, other}},
		},
		Resolver: res,
		Log:      ev.log,
	})
	targets := []struct{ target, reason string }{
		{"169.254.169.254:80", "link-local"},
		{fmt.Sprintf("127.0.0.1:%d", other), "loopback"},
		{"127.0.0.1:22", "no rule"},
		{"10.0.0.1:443", "private"},
		{"172.16.5.4:443", "private"},
		{"192.168.0.1:80", "private"},
		{"100.64.0.1:443", "CGNAT"},
		{"[fd00::1]:443", "unique local"},
		{"[fe80::1]:443", "link-local"},
		{fmt.Sprintf("[::ffff:127.0.0.1]:%d", other), "IPv4-mapped loopback"},
		{fmt.Sprintf("[::1]:%d", other), "loopback"},
		{fmt.Sprintf("2130706433:%d", other), "loopback"},
		{fmt.Sprintf("0177.0.0.1:%d", other), "loopback"},
		{fmt.Sprintf("0x7f.1:%d", other), "loopback"},
		{"[64:ff9b::a9fe:a9fe]:80", "NAT64"},
		{"0.0.0.0:443", "this-network"},
		{"255.255.255.255:443", "broadcast"},
		{"224.0.0.1:443", "multicast"},
		{fmt.Sprintf("internal.example.com:%d", port), "private"},
		{fmt.Sprintf("loop.example.com:%d", port), "loopback"},
		{fmt.Sprintf("mixed.example.com:%d", port), "loopback"},
		{"meta.example.com:80", "link-local"},
		{fmt.Sprintf("mapped.example.com:%d", port), "loopback"},
		{"metadata.google.internal:80", "metadata"},
		{"evil.test:22", "no rule"},
		{"example.com.:22", "no rule"},
	}
	if ip := hostAddr(); ip.IsValid() {
		targets = append(targets, struct{ target, reason string }{netip.AddrPortFrom(ip, uint16(other)).String(), "blocked"})
	}
	for _, tt := range targets {
		t.Run(tt.target, func(t *testing.T) {
			_, code, body := connect(t, sock, tt.target)
			if code != http.StatusForbidden || !strings.Contains(body, tt.reason) {
				t.Errorf("CONNECT %s = %d %q, want 403 mentioning %q", tt.target, code, body, tt.reason)
			}
			e := ev.next(t)
			if e.Decision != "deny" || !strings.Contains(e.Reason, tt.reason) || e.IP.IsValid() || e.Rule != "" {
				t.Errorf("event = %+v, want a deny with reason %q and no IP or rule", e, tt.reason)
			}
		})
	}
}

// hostAddr returns a non-loopback address of this host, if any.
func hostAddr() netip.Addr {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ip, _ := netip.AddrFromSlice(n.IP)
			if ip = ip.Unmap(); !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				if BlockedReason(ip) == "" {
					continue // a public address is allowed by "*", by design
				}
				return ip
			}
		}
	}
	return netip.Addr{}
}

func TestNameResolvedOnceAndDialedByAddress(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.2:0")
	res := newResolver(map[string][]string{"rebind.test": {"127.0.0.2"}})
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "rebind.test", Ports: []int{port}, CIDR: netip.MustParsePrefix("127.0.0.2/32")}},
		Resolver: res,
		Log:      ev.log,
	})
	c, code, body := connect(t, sock, fmt.Sprintf("rebind.test:%d", port))
	if code != http.StatusOK {
		t.Fatalf("CONNECT = %d %s", code, body)
	}
	// The name now points elsewhere; the open connection must stay on
	// the checked address and no second lookup may happen.
	res.set("rebind.test", "127.0.0.1")
	echoOnce(t, c, "still the checked address")
	c.Close()
	if e := ev.next(t); e.IP != netip.MustParseAddr("127.0.0.2") || e.Decision != "allow" {
		t.Errorf("event = %+v, want allow dialing 127.0.0.2", e)
	}
	if n := res.calls.Load(); n != 1 {
		t.Errorf("resolver called %d times for one connection, want 1", n)
	}
	_, code, body = connect(t, sock, fmt.Sprintf("rebind.test:%d", port))
	if code != http.StatusForbidden || !strings.Contains(body, "loopback") {
		t.Errorf("after rebinding to 127.0.0.1: %d %q, want 403 loopback", code, body)
	}
	// Names no rule allows are never resolved (no DNS side channel).
	before := res.calls.Load()
	connect(t, sock, "unlisted.test:443")
	if res.calls.Load() != before {
		t.Error("proxy resolved a name that no rule allows")
	}
}

func TestForward(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	other := startEcho(t, "127.0.0.1:0")
	res := newResolver(map[string][]string{"db.internal": {"127.0.0.1"}})
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Forwards: []Forward{{Listen: "127.0.0.1:5432", To: fmt.Sprintf("db.internal:%d", port)}},
		Resolver: res,
		Log:      ev.log,
	})
	c, code, body := connect(t, sock, fmt.Sprintf("db.internal:%d", port))
	if code != http.StatusOK {
		t.Fatalf("CONNECT to forward = %d %s", code, body)
	}
	echoOnce(t, c, "select 1")
	c.Close()
	if e := ev.next(t); e.Kind != "forward" || e.Decision != "allow" || !strings.HasPrefix(e.Rule, "forward ") {
		t.Errorf("event = %+v, want an allowed forward", e)
	}
	for _, target := range []string{fmt.Sprintf("db.internal:%d", other), fmt.Sprintf("127.0.0.1:%d", port)} {
		if _, code, _ := connect(t, sock, target); code != http.StatusForbidden {
			t.Errorf("CONNECT %s = %d, want 403: a forward allows only its exact target", target, code)
		}
		ev.next(t)
	}
}

func TestCloseEndsConnections(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	p, sock := startProxy(t, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}, Log: ev.log})
	c, code, _ := connect(t, sock, fmt.Sprintf("127.0.0.1:%d", port))
	if code != http.StatusOK {
		t.Fatalf("CONNECT = %d", code)
	}
	echoOnce(t, c, "x")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("connection still open after Close")
	}
	if e := ev.next(t); e.Reason != "proxy closed" {
		t.Errorf("event reason = %q, want proxy closed", e.Reason)
	}
	if p.ActiveConns() != 0 {
		t.Errorf("ActiveConns = %d after Close", p.ActiveConns())
	}
}
