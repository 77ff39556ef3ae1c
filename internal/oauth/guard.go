package oauth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// This file keeps the flow's requests out of networks the user did not
// point mcpbox at. Documents of a remote server or authorization server
// name the URLs the flow fetches (metadata, endpoints, redirects); a
// hostile one could name a local service, a cloud metadata address or a
// host of the private network, by IP or by a name that resolves there.
// The check is on the address each connection is made to (a
// net.Dialer's Control, after resolution), so a name that resolves to a
// public address when checked and to a private one when dialed (DNS
// rebinding) gains nothing.

// netClass orders addresses from the outside in: a flow may reach the
// classes up to that of the URL the user configured (its anchor).
type netClass int

const (
	classPublic    netClass = iota
	classPrivate            // RFC 1918, RFC 6598 shared, IPv6 unique local
	classLinkLocal          // link-local (169.254.169.254: cloud metadata), unspecified
	classLoopback
)

var (
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
	awsMetaV6   = netip.MustParseAddr("fd00:ec2::254")
)

// IPv6 forms that carry an IPv4 address a gateway or the kernel may
// connect on to: the class is the IPv4 address's.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052: the last 32 bits
	nat64Site = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215: a site's own translator
	sixToFour = netip.MustParsePrefix("2002::/16")       // RFC 3056: bits 16 to 48
	v4Compat  = netip.MustParsePrefix("::/96")           // deprecated IPv4-compatible
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765 IPv4-translated
	thisNet   = netip.MustParsePrefix("0.0.0.0/8")       // "this network": the host itself
)

// notPublic are further ranges no server on the internet has a reason to
// send the flow to, classed private: they are not the internet's, and
// some reach services of the host's network (192.0.0.192 was a cloud's
// metadata address). As egress.BlockedReason has them; benchmarking
// (198.18/15) and documentation ranges stay public there and here.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("192.0.0.0/24"), // IETF protocol assignments
	netip.MustParsePrefix("240.0.0.0/4"),  // reserved
	netip.MustParsePrefix("224.0.0.0/4"),  // multicast
	netip.MustParsePrefix("100::/64"),     // discard-only
	netip.MustParsePrefix("2001::/32"),    // Teredo: embeds an obfuscated IPv4 address
	netip.MustParsePrefix("fec0::/10"),    // site-local (deprecated)
	netip.MustParsePrefix("ff00::/8"),     // multicast
}

func classOf(ip netip.Addr) netClass {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip), siit.Contains(ip), v4Compat.Contains(ip) && !ip.IsLoopback() && !ip.IsUnspecified():
			return classOf(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return classOf(netip.AddrFrom4([4]byte(b[2:6])))
		case nat64Site.Contains(ip):
			return max(classPrivate, classOf(netip.AddrFrom4([4]byte(b[12:16]))))
		}
	}
	switch {
	case thisNet.Contains(ip):
		return classLinkLocal
	case ip.IsLoopback():
		return classLoopback
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsUnspecified(), ip == awsMetaV6:
		return classLinkLocal
	case ip.IsPrivate(), sharedSpace.Contains(ip):
		return classPrivate
	}
	for _, p := range notPublic {
		if p.Contains(ip) {
			return classPrivate
		}
	}
	return classPublic
}

func (c netClass) String() string {
	return [...]string{"public", "private", "link-local", "loopback"}[c]
}

// dialGuard refuses connections to addresses of a class above its
// anchor's: the anchor's own address decides (a server on the private
// network may use an authorization server there; one on the internet may
// not send mcpbox into the private network). Connections to a proxy of
// the environment (HTTPS_PROXY, ...) are the user's choice and not
// checked; the proxy resolves the names then.
//
// The anchor's name is the user's choice but its DNS answers are not:
// they are the remote server's. So the anchor's class is learned from
// the first connection made to it (the address the dialer connected to,
// not a lookup of its own, which a rebinding name could answer
// differently), and every later connection, to the anchor too, is
// checked against it. Before any connection to the anchor, the class is
// the lowest (most public) of its looked-up addresses: a name listing a
// loopback address beside a public one does not open loopback.
type dialGuard struct {
	anchor  string // host of the configured URL
	proxies map[string]bool
	// resolver and dial, if non-nil, replace net.DefaultResolver's
	// lookup and the first dial to the anchor (tests).
	resolver func(ctx context.Context, host string) ([]netip.Addr, error)
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu       sync.Mutex
	resolved bool     // guarded by mu
	learned  bool     // guarded by mu: limit is the class of a connection made to the anchor
	limit    netClass // guarded by mu
}

// anchorLimit is the anchor's class: the class of the first connection
// made to it, or until then the lowest class among its looked-up
// addresses (resolved once); public (the strictest) while it does not
// resolve, and tried again at the next connection then (a long-lived
// client, such as the JWT validator's, must not keep a passing DNS
// failure).
func (g *dialGuard) anchorLimit() netClass {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resolved {
		return g.limit
	}
	if ip, err := netip.ParseAddr(g.anchor); err == nil {
		g.limit, g.resolved, g.learned = classOf(ip), true, true
		return g.limit
	}
	if g.anchor == "localhost" {
		g.limit, g.resolved, g.learned = classLoopback, true, true
		return g.limit
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lookup := g.resolver
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ips, err := lookup(ctx, g.anchor)
	if err != nil || len(ips) == 0 {
		return classPublic
	}
	g.limit = classLoopback
	for _, ip := range ips {
		g.limit = min(g.limit, classOf(ip))
	}
	g.resolved = true
	return g.limit
}

// learn sets the anchor's class from the address a connection to it was
// made to, once.
func (g *dialGuard) learn(remote net.Addr) {
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.learned {
		g.limit, g.resolved, g.learned = classOf(ap.Addr()), true, true
	}
}

// firstToAnchor says whether addr is the anchor and its class is still to
// be learned from a connection.
func (g *dialGuard) firstToAnchor(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !strings.EqualFold(strings.TrimSuffix(host, "."), g.anchor) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.learned
}

// control is the net.Dialer Control: address is the IP and port about
// to be connected to.
func (g *dialGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to connect to %q: not an IP address", address)
	}
	if c, limit := classOf(ap.Addr()), g.anchorLimit(); c > limit {
		return fmt.Errorf("refusing to connect to %s: a %s address, and %s is not", ap.Addr(), c, g.anchor)
	}
	return nil
}

// dialContext dials addr: a proxy of the environment as it is; the
// anchor, the first time, wherever it resolves (the user named it), its
// class learned from the connection; anything else checked by control.
func (g *dialGuard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.proxies[addr] {
		return (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	}
	if g.firstToAnchor(addr) {
		dial := g.dial
		if dial == nil {
			dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		c, err := dial(ctx, network, addr)
		if err == nil {
			g.learn(c.RemoteAddr())
			// A concurrent first dial may have learned another class.
			if ap, perr := netip.ParseAddrPort(c.RemoteAddr().String()); perr != nil || g.control(network, ap.String(), nil) != nil {
				c.Close()
				return nil, fmt.Errorf("refusing to connect to %s: the anchor %s was first reached at a more public address", c.RemoteAddr(), g.anchor)
			}
		}
		return c, err
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	return d.DialContext(ctx, network, addr)
}

// guardedClient is the default client of a flow anchored at rawURL (the
// server or issuer the user configured).
func guardedClient(rawURL string) *http.Client {
	host := ""
	if u, err := url.Parse(rawURL); err == nil {
		host = strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	}
	g := &dialGuard{anchor: host, proxies: envProxies()}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = g.dialContext
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// envProxies are the host:port of the proxies the environment names.
func envProxies() map[string]bool {
	out := map[string]bool{}
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		u, err := url.Parse(os.Getenv(k))
		if err != nil || u.Host == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "socks5": "1080"}[u.Scheme]
			if port == "" {
				port = "80"
			}
		}
		out[net.JoinHostPort(u.Hostname(), port)] = true
	}
	return out
}
