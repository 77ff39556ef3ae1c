package egress

import "net/netip"

// blockedRange is an address range the proxy refuses unless a rule names it.
type blockedRange struct {
	prefix netip.Prefix
	reason string
}

// Documentation (TEST-NET, 2001:db8::/32) and benchmarking (198.18/15)
// ranges are not refused: they reach no internal network, and some
// networks use them for real services (this project's CI mirrors package
// registries on TEST-NET-3; fake-IP DNS setups hand out 198.18/15).
var blockedV4 = []blockedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network address (0.0.0.0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private address (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local address (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private address (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private address (RFC 1918)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved address (240.0.0.0/4)"},
}

var blockedV6 = []blockedRange{
	{netip.MustParsePrefix("::/128"), "unspecified address"},
	{netip.MustParsePrefix("::1/128"), "loopback address"},
	// IPv4-compatible addresses are deprecated; none is legitimately
	// reachable, so all of ::/96 is refused, not only blocked embeddings.
	{netip.MustParsePrefix("::/96"), "IPv4-compatible IPv6 address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated IPv6 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "discard-only address"},
	{netip.MustParsePrefix("2001::/32"), "Teredo address (embeds an obfuscated IPv4 address)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local address (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "multicast address"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// BlockedReason says why ip may not be dialed unless a rule names it (or,
// for a HostFetch, a trusted host), or returns "" for a public address. IPv6 forms that embed an IPv4 address
// the host would route to it (IPv4-mapped, NAT64, 6to4) are judged by the
// embedded address.
func BlockedReason(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid address"
	}
	if ip.Zone() != "" {
		return "zoned address"
	}
	if ip.Is4In6() {
		if r := BlockedReason(ip.Unmap()); r != "" {
			return "IPv4-mapped " + r
		}
		return ""
	}
	if ip.Is4() {
		return lookupRange(blockedV4, ip)
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		if r := BlockedReason(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return "NAT64 " + r
		}
		return ""
	}
	if sixToFour.Contains(ip) {
		b := ip.As16()
		if r := BlockedReason(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return "6to4 " + r
		}
		return ""
	}
	return lookupRange(blockedV6, ip)
}

func lookupRange(ranges []blockedRange, ip netip.Addr) string {
	for _, r := range ranges {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	return ""
}

// embeddedV4 returns the IPv4 address an IPv6 form routes to: IPv4-mapped,
// NAT64 (64:ff9b::/96) or 6to4 (2002::/16).
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	switch {
	case ip.Is4In6():
		return ip.Unmap(), true
	case ip.Is6() && nat64.Contains(ip):
		b := ip.As16()
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case ip.Is6() && sixToFour.Contains(ip):
		b := ip.As16()
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}
