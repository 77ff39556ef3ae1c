package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// A target host as a client spelled it is either a host name or an IP
// address. parseHost decides which, the way curl and browsers (WHATWG URL
// "ends in a number") do: when the last label is numeric, the whole host is
// an IPv4 address in inet_aton syntax (2130706433, 0177.0.0.1, 0x7f.1) and
// is treated as that address; when it does not parse as one, it is refused,
// never resolved. So no spelling of a blocked address reaches the resolver
// as a "name".

// parseHost normalizes host: IPv6 brackets and one trailing dot removed,
// ASCII lowercased. It returns either a valid IP (name empty) or a valid
// host name (ip invalid).
func parseHost(host string) (name string, ip netip.Addr, err error) {
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
		if !strings.Contains(h, ":") {
			return "", netip.Addr{}, fmt.Errorf("invalid host %q: brackets around a non-IPv6 host", host)
		}
	}
	if strings.Contains(h, ":") {
		a, perr := netip.ParseAddr(h)
		if perr != nil {
			return "", netip.Addr{}, fmt.Errorf("invalid IPv6 address %q", host)
		}
		if a.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("invalid host %q: zoned addresses are not allowed", host)
		}
		return "", a, nil
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return "", netip.Addr{}, errors.New("empty host")
	}
	labels := strings.Split(h, ".")
	if isNumericLabel(labels[len(labels)-1]) {
		a, ok := parseInetAton(h)
		if !ok {
			return "", netip.Addr{}, fmt.Errorf("invalid IPv4 address %q", host)
		}
		return "", a, nil
	}
	if err := checkHostName(h, labels); err != nil {
		return "", netip.Addr{}, fmt.Errorf("invalid host %q: %w", host, err)
	}
	return h, netip.Addr{}, nil
}

// isNumericLabel reports whether l is decimal digits or 0x followed by hex
// digits (possibly none: "0x" makes the host an invalid IPv4 address, not a
// name, as in the WHATWG URL parser).
func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for _, c := range l[2:] {
			if !isHex(c) {
				return false
			}
		}
		return true
	}
	for _, c := range l {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isHex(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseInetAton parses the 1 to 4 part IPv4 syntax of inet_aton(3): each
// part decimal, octal (leading 0) or hex (0x); the last part fills the
// remaining bytes (a: 32 bits, a.b: 8.24, a.b.c: 8.8.16).
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals [4]uint64
	for i, p := range parts {
		v, ok := parseInetPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	n := len(parts)
	for i := 0; i < n-1; i++ {
		if vals[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	lastBits := uint(8 * (5 - n))
	if vals[n-1] >= 1<<lastBits {
		return netip.Addr{}, false
	}
	v := vals[n-1]
	for i := 0; i < n-1; i++ {
		v |= vals[i] << (24 - 8*uint(i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseInetPart(p string) (uint64, bool) {
	base := 10
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	if p == "" || p[0] == '+' || p[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}

// checkHostName accepts LDH names (plus '_', which real DNS names carry);
// IDNs must arrive as punycode (xn--), which is plain ASCII.
func checkHostName(h string, labels []string) error {
	if len(h) > 253 {
		return errors.New("name longer than 253 bytes")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("empty or over-long label")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if c >= 0x80 {
				return errors.New("non-ASCII name; use punycode (xn--)")
			}
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q not allowed", c)
			}
		}
	}
	return nil
}

// ParseHost is how the proxy reads a target host: either a host name
// (lowercased, one trailing dot removed) or, when the proxy takes it as
// one, an IP address, in any spelling it accepts (brackets, a trailing
// dot, inet_aton forms such as 2130706433, 0x7f.1, 127.1, 0251.0376.0.1).
// A check elsewhere that decides "address or name" before handing a host
// to the proxy must decide it the same way.
func ParseHost(host string) (name string, ip netip.Addr, err error) {
	name, ip, err = parseHost(host)
	return name, ip.Unmap(), err
}
