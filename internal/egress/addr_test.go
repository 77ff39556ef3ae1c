package egress

import (
	"net"
	"net/netip"
	"testing"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		in      string
		name    string
		ip      string
		wantErr bool
	}{
		{in: "example.com", name: "example.com"},
		{in: "Example.COM.", name: "example.com"},
		{in: "xn--bcher-kva.example", name: "xn--bcher-kva.example"},
		{in: "_srv.example.com", name: "_srv.example.com"},
		{in: "127.0.0.1", ip: "127.0.0.1"},
		{in: "127.0.0.1.", ip: "127.0.0.1"},
		{in: "2130706433", ip: "127.0.0.1"},
		{in: "0177.0.0.1", ip: "127.0.0.1"},
		{in: "0x7f.1", ip: "127.0.0.1"},
		{in: "0x7F000001", ip: "127.0.0.1"},
		{in: "127.1", ip: "127.0.0.1"},
		{in: "127.0.1", ip: "127.0.0.1"},
		{in: "0", ip: "0.0.0.0"},
		{in: "169.254.43518", ip: "169.254.169.254"},
		{in: "0251.0376.0251.0376", ip: "169.254.169.254"},
		{in: "10.0.0.010", ip: "10.0.0.8"},
		{in: "::1", ip: "::1"},
		{in: "[::1]", ip: "::1"},
		{in: "::ffff:127.0.0.1", ip: "::ffff:127.0.0.1"},
		{in: "[::ffff:7f00:1]", ip: "::ffff:127.0.0.1"},
		{in: "4294967296", wantErr: true},
		{in: "256.0.0.1", wantErr: true},
		{in: "1.2.3.4.5", wantErr: true},
		{in: "08.0.0.1", wantErr: true},
		{in: "0x", wantErr: true},
		{in: "1.2.3.0x", wantErr: true},
		{in: "example.123", wantErr: true},
		{in: "1.2.65536", wantErr: true},
		{in: "fe80::1%eth0", wantErr: true},
		{in: "[127.0.0.1]", wantErr: true},
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
		{in: "a..b", wantErr: true},
		{in: "bücher.example", wantErr: true},
		{in: "evil.com\x00.example.com", wantErr: true},
		{in: "a b.com", wantErr: true},
		{in: "::g", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, ip, err := parseHost(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseHost(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			want := netip.Addr{}
			if tt.ip != "" {
				want = netip.MustParseAddr(tt.ip)
			}
			if name != tt.name || ip != want {
				t.Errorf("parseHost(%q) = %q, %v; want %q, %v", tt.in, name, ip, tt.name, want)
			}
		})
	}
}

func TestBlockedReason(t *testing.T) {
	blocked := []string{
		"127.0.0.1", "127.255.255.254", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.255",
		"224.0.0.1", "239.255.255.250", "0.0.0.0", "0.1.2.3", "255.255.255.255", "240.0.0.1",
		"192.0.0.1",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "febf::1", "fec0::1", "ff02::1", "ff0e::1",
		"::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::ffff:0.0.0.0",
		"::127.0.0.1", "::10.0.0.1", "::8.8.8.8", "::ffff:0:127.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:101", "64:ff9b:1::1",
		"2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:0a00:0001::", "2001:0:4136:e378::1",
		"100::1",
	}
	public := []string{
		"8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.0", "100.63.255.255", "100.128.0.0",
		"169.253.255.255", "169.255.0.0", "192.167.255.255", "192.169.0.0", "11.0.0.0", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8",
		"64:ff9b::808:808", "2002:808:808::1", "fbff::1", "fe7f::1",
		"192.0.2.1", "198.18.0.1", "198.51.100.1", "203.0.113.80", "2001:db8::1",
	}
	for _, s := range blocked {
		t.Run("blocked/"+s, func(t *testing.T) {
			if r := BlockedReason(netip.MustParseAddr(s)); r == "" {
				t.Errorf("BlockedReason(%s) = \"\", want a reason", s)
			}
		})
	}
	for _, s := range public {
		t.Run("public/"+s, func(t *testing.T) {
			if r := BlockedReason(netip.MustParseAddr(s)); r != "" {
				t.Errorf("BlockedReason(%s) = %q, want public", s, r)
			}
		})
	}
}

// refBlocked is a slow reference built on package net's own predicates
// and prefix lists, sharing no tables with ipclass.go.
func refBlocked(b [16]byte, is4 bool) bool {
	ip := net.IP(b[:])
	if is4 {
		ip = net.IP(b[12:16])
	}
	if v4 := ip.To4(); v4 != nil {
		return refBlocked4(v4)
	}
	if ip.IsLoopback() || ip.IsUnspecified() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsMulticast() {
		return true
	}
	for _, c := range []string{"::/96", "::ffff:0:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/32", "fec0::/10"} {
		if _, n, _ := net.ParseCIDR(c); n.Contains(ip) {
			return true
		}
	}
	if _, n, _ := net.ParseCIDR("64:ff9b::/96"); n.Contains(ip) {
		return refBlocked4(ip[12:16])
	}
	if ip[0] == 0x20 && ip[1] == 0x02 {
		return refBlocked4(ip[2:6])
	}
	return false
}

func refBlocked4(v4 net.IP) bool {
	if v4.IsLoopback() || v4.IsPrivate() || v4.IsLinkLocalUnicast() || v4.IsMulticast() || v4[0] == 0 || v4[0] >= 240 {
		return true
	}
	for _, c := range []string{"100.64.0.0/10", "192.0.0.0/24"} {
		if _, n, _ := net.ParseCIDR(c); n.Contains(v4) {
			return true
		}
	}
	return false
}

func FuzzBlockedReason(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:c0a8:101::", "8.8.8.8", "fe80::1", "2606:4700::1"} {
		a := netip.MustParseAddr(s)
		b := a.As16()
		f.Add(b[:], a.Is4())
	}
	f.Fuzz(func(t *testing.T, raw []byte, is4 bool) {
		var b [16]byte
		copy(b[:], raw)
		a := netip.AddrFrom16(b)
		if is4 {
			a = netip.AddrFrom4([4]byte(b[12:16]))
		}
		got := BlockedReason(a) != ""
		if want := refBlocked(b, is4); got != want {
			t.Errorf("BlockedReason(%s) blocked = %v, reference says %v", a, got, want)
		}
	})
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"example.com", "2130706433", "0x7f.1", "[::1]", "a.b.c.d.e", "0177.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, ip, err := parseHost(s)
		if err != nil {
			return
		}
		if name != "" && ip.IsValid() || name == "" && !ip.IsValid() {
			t.Fatalf("parseHost(%q) = %q, %v: want exactly one of name and IP", s, name, ip)
		}
		if name != "" {
			// A name never hides an IP: resolving it cannot be skipped by a
			// spelling the proxy failed to recognize as an address.
			if _, perr := netip.ParseAddr(name); perr == nil {
				t.Fatalf("parseHost(%q) returned name %q that is an IP", s, name)
			}
			if n2, _, err := parseHost(name); err != nil || n2 != name {
				t.Fatalf("parseHost not idempotent on %q: %q, %v", name, n2, err)
			}
		}
	})
}
