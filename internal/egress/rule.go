package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// defaultPorts are the ports of a Rule that lists none.
var defaultPorts = []int{443, 80}

// Rule allows connections to matching targets.
type Rule struct {
	// Host is an exact host name, "*.suffix" (any name strictly below
	// suffix), "*" (any host, IP targets included), or an IPv4/IPv6
	// literal. Matching ignores case and one trailing dot. Empty: CIDR
	// alone decides, for IP targets only.
	Host string
	// Ports are the allowed destination ports; empty: 443 and 80.
	Ports []int
	// CIDR, with Host: blocked (private, loopback, ...) addresses Host may
	// resolve to and still be dialed. Without Host: IP targets in CIDR,
	// blocked or not. The zero Prefix means none.
	CIDR netip.Prefix
}

// String is how events name the rule, e.g. "*.example.com:443,80".
func (r Rule) String() string {
	var b strings.Builder
	switch {
	case r.Host != "" && strings.Contains(r.Host, ":"):
		b.WriteString("[" + r.Host + "]")
	case r.Host != "":
		b.WriteString(r.Host)
	}
	if r.CIDR.IsValid() {
		if r.Host != "" {
			b.WriteString(" in ")
		}
		b.WriteString(r.CIDR.String())
	}
	b.WriteByte(':')
	for i, p := range r.AllowedPorts() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}

// AllowedPorts are the ports r allows: Ports, or 443 and 80.
func (r Rule) AllowedPorts() []int {
	if len(r.Ports) == 0 {
		return defaultPorts
	}
	return r.Ports
}

// Forward is an explicit allow rule for exactly the host:port To, which may
// be private or loopback since it is named. Listen is where the sandbox side
// accepts connections for it (127.0.0.1:PORT inside the sandbox); the
// sandbox reaches To through the proxy with a plain CONNECT to To.
type Forward struct {
	Listen string
	To     string
}

// rule is a validated Rule: Host split into name or IP, wildcard parsed.
type rule struct {
	Rule
	name   string     // normalized exact name; "" for wildcards and IPs
	suffix string     // "*.suffix": ".suffix"
	any    bool       // "*"
	ip     netip.Addr // IP literal Host
}

func compileRule(r Rule) (rule, error) {
	c := rule{Rule: r}
	for _, p := range r.Ports {
		if p < 1 || p > 65535 {
			return c, fmt.Errorf("rule %q: port %d out of range 1-65535", r.Host, p)
		}
	}
	if r.CIDR.IsValid() {
		if r.CIDR != r.CIDR.Masked() {
			return c, fmt.Errorf("rule %q: CIDR %s has host bits set (want %s)", r.Host, r.CIDR, r.CIDR.Masked())
		}
		if r.CIDR.Addr().Zone() != "" {
			return c, fmt.Errorf("rule %q: CIDR %s has a zone", r.Host, r.CIDR)
		}
	}
	h := r.Host
	switch {
	case h == "":
		if !r.CIDR.IsValid() {
			return c, fmt.Errorf("rule with neither host nor CIDR")
		}
	case h == "*":
		c.any = true
	case strings.HasPrefix(h, "*."):
		name, ip, err := parseHost(h[2:])
		if err != nil || ip.IsValid() {
			return c, fmt.Errorf("rule %q: wildcard needs a host name suffix", h)
		}
		c.suffix = "." + name
	case strings.Contains(h, "*"):
		return c, fmt.Errorf("rule %q: '*' only as the whole host or a leading \"*.\"", h)
	default:
		name, ip, err := parseHostStrict(h)
		if err != nil {
			return c, fmt.Errorf("rule %q: %w", h, err)
		}
		if ip.IsValid() && r.CIDR.IsValid() {
			return c, fmt.Errorf("rule %q: an IP host with a CIDR; use the CIDR alone", h)
		}
		c.name, c.ip = name, ip.Unmap()
	}
	return c, nil
}

// parseHostStrict is parseHost that refuses non-canonical IPv4 spellings in
// configuration, where they can only be a mistake.
func parseHostStrict(h string) (string, netip.Addr, error) {
	name, ip, err := parseHost(h)
	if err != nil || !ip.IsValid() {
		return name, ip, err
	}
	if ip.Is4() {
		if _, perr := netip.ParseAddr(strings.TrimSuffix(h, ".")); perr != nil {
			return "", netip.Addr{}, fmt.Errorf("non-canonical IPv4 address; write %s", ip)
		}
	}
	return "", ip, nil
}

func (r *rule) allowsPort(port int) bool { return slices.Contains(r.AllowedPorts(), port) }

// matchesName reports whether the rule's host pattern covers the
// normalized host name. The suffix must be strictly below: "*.example.com"
// matches "a.example.com" but neither "example.com" nor "evilexample.com".
func (r *rule) matchesName(name string) bool {
	switch {
	case r.any:
		return true
	case r.suffix != "":
		return len(name) > len(r.suffix) && strings.HasSuffix(name, r.suffix)
	default:
		return r.name != "" && r.name == name
	}
}

// namesIP reports whether the rule names ip explicitly, which overrides
// the blocked ranges: its Host is ip, or it is a CIDR-only rule covering
// ip. With a host name, a CIDR only lists what that name may resolve to
// (checkAddrs); it opens no IP literal in the range.
func (r *rule) namesIP(ip netip.Addr) bool {
	if r.ip.IsValid() {
		return r.ip == ip
	}
	return r.CIDR.IsValid() && !r.any && r.name == "" && r.suffix == "" && r.CIDR.Contains(ip)
}

// ParseHostPort parses the --allow-host flag value HOST[:PORT]: a host as
// in Rule.Host (IPv6 in brackets when a port follows). Without a port the
// rule allows ports 443 and 80.
func ParseHostPort(s string) (Rule, error) {
	if scheme, rest, ok := strings.Cut(s, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, ".:[") {
		// A URL pasted for a host (its "//" read as an IPv6 address).
		hostPort, _, _ := strings.Cut(rest, "/")
		return Rule{}, fmt.Errorf("parsing host %q: want HOST[:PORT], not a URL (here: %s)", s, hostPort)
	}
	host, portStr, split := s, "", false
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, portStr, split = h, p, true
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Count(s, ":") == 1 {
		return Rule{}, fmt.Errorf("parsing host %q: %w", s, err)
	}
	r := Rule{Host: host}
	switch {
	case split && portStr == "":
		return Rule{}, fmt.Errorf("parsing host %q: empty port (HOST alone allows 443 and 80)", s)
	case strings.Contains(portStr, "/"):
		return Rule{}, fmt.Errorf("parsing host %q: want HOST[:PORT], not a URL path", s)
	}
	if portStr != "" {
		p, err := strconv.Atoi(portStr)
		if err != nil {
			return Rule{}, fmt.Errorf("parsing port of %q: invalid port %q", s, portStr)
		}
		r.Ports = []int{p}
	}
	if r.Host == "" {
		return Rule{}, fmt.Errorf("parsing host %q: empty host", s)
	}
	if _, err := compileRule(r); err != nil {
		return Rule{}, fmt.Errorf("parsing host %q: %w", s, err)
	}
	return r, nil
}
