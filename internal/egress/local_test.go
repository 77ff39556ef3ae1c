package egress

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

// The host's own address and network are refused even in a range that is
// otherwise public (this VM's address is in TEST-NET-1), even through "*".
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
	for _, a := range []string{"192.0.2.1", "192.0.2.255", "[64:ff9b::c000:202]", "[2002:c000:202::1]"} {
		if pl := p.decide(a, 443); !strings.Contains(pl.deny, "this host") {
			t.Errorf("%s (the host's network or its address embedded): deny %q, want a refusal", a, pl.deny)
		}
	}
	if pl := p.decide("192.0.3.1", 443); pl.deny != "" {
		t.Fatalf("an address off the host's networks refused: %q", pl.deny)
	}
	pl := p.decide("svc.example", 443)
	if _, deny := p.checkAddrs(pl, []netip.Addr{netip.MustParseAddr("192.0.2.2")}); !strings.Contains(deny, "this host") {
		t.Fatalf("name resolving to the host: deny %q, want a refusal", deny)
	}
}

// A CIDR beside a host name lists what that name may resolve to; it must
// not open IP literals in the range (every Postgres on 10/8).
func TestHostCIDROpensNoLiterals(t *testing.T) {
	p, err := compilePolicy([]Rule{{Host: "db.internal", CIDR: netip.MustParsePrefix("10.0.0.0/8"), Ports: []int{5432}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.9.9.9", "[::ffff:10.1.1.1]"} {
		if pl := p.decide(a, 5432); pl.deny == "" {
			t.Errorf("%s:5432 allowed by a host+CIDR rule", a)
		}
	}
	pl := p.decide("db.internal", 5432)
	if _, deny := p.checkAddrs(pl, []netip.Addr{netip.MustParseAddr("10.1.2.3")}); deny != "" {
		t.Fatalf("db.internal resolving into its CIDR refused: %s", deny)
	}
	cidrOnly, err := compilePolicy([]Rule{{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Ports: []int{5432}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pl := cidrOnly.decide("10.9.9.9", 5432); pl.deny != "" {
		t.Fatalf("a CIDR-only rule refused an address in its range: %s", pl.deny)
	}
}

func TestPrintableHost(t *testing.T) {
	got := printableHost("x\nmcpbox: FORGED \x1b[31m")
	if strings.ContainsAny(got, "\n\x1b") {
		t.Fatalf("control characters survive: %q", got)
	}
	if printableHost("api.example.com") != "api.example.com" {
		t.Fatal("a plain host name was altered")
	}
}
