package egress

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

// The host's own address is refused even in a range that is otherwise
// public (this VM's address is in TEST-NET-1), and even through "*".
func TestHostAddressRefused(t *testing.T) {
	p, err := compilePolicy([]Rule{{Host: "*"}, {Host: "svc.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.local.list = func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("192.0.2.2"), Mask: net.CIDRMask(24, 32)}}, nil
	}
	if pl := p.decide("192.0.2.2", 443); !strings.Contains(pl.deny, "this host") {
		t.Fatalf("host address: deny %q, want a refusal", pl.deny)
	}
	if pl := p.decide("[::ffff:192.0.2.2]", 443); pl.deny == "" {
		t.Fatal("host address in IPv4-mapped form allowed")
	}
	if pl := p.decide("192.0.2.3", 443); pl.deny != "" {
		t.Fatalf("a neighbour address refused: %q", pl.deny)
	}
	pl := p.decide("svc.example", 443)
	if _, deny := p.checkAddrs(pl, []netip.Addr{netip.MustParseAddr("192.0.2.2")}); !strings.Contains(deny, "this host") {
		t.Fatalf("name resolving to the host: deny %q, want a refusal", deny)
	}
}
