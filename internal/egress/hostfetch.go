package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrPrivateAddress refuses a host-side connection to an address the
// proxy would refuse too: loopback, private, link-local (cloud
// metadata), CGNAT, multicast, unspecified, in any IPv6 form that embeds
// one of those.
var ErrPrivateAddress = errors.New("refusing a host-side fetch of a non-public address")

// HostFetch guards the fetches mcpbox makes from the host itself, outside
// any sandbox and its proxy, of URLs that untrusted data chose: an
// archive's URL in a registry's answer, a redirect, an image registry's
// token server or blob location. Such a URL reaches whatever its host
// resolves to, with the host's network: cloud metadata (169.254.169.254),
// this host's loopback services, the LAN. HostFetch refuses a connection
// whose address is one of those, checked in the dialer's Control hook on
// the address actually dialed, after resolution, so no name (a DNS
// rebinding one, `localhost`, an odd IPv4 spelling the resolver accepts)
// and no redirect gets past it.
//
// The zero value trusts nothing. The checks are the proxy's: the ranges
// (BlockedReason), and the host's own addresses and the networks of its
// interfaces whatever their range (localAddrs): a registry that sees the
// host's public address as the fetch's source could otherwise name it,
// and reach every service the host binds to 0.0.0.0. A registry mirror
// on the host's network is reached by naming it in the configuration
// (Trusted).
type HostFetch struct {
	// Trusted are "host:port" pairs the user's configuration names (a
	// registry, an index, an image's registry): a connection to one is
	// not checked, so a configured registry on loopback or the LAN keeps
	// working. Matched on the host as the URL spells it, ignoring ASCII
	// case only (a trailing dot or another spelling of an address is
	// checked like any other host).
	Trusted []string
	// Resolver, if non-nil, resolves names; nil means net.DefaultResolver.
	Resolver *net.Resolver

	proxies sync.Map   // "host:port" of the environment's proxies, trusted (the user's)
	local   localAddrs // the host's own addresses and networks
}

// hostPortKey is the case-folded "host:port" of addr, "" if addr is not one.
func hostPortKey(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || h == "" || p == "" {
		return ""
	}
	return net.JoinHostPort(strings.ToLower(h), p)
}

// URLHostPort is u's "host:port", the scheme's default port filled in.
func URLHostPort(u *url.URL) string {
	p := u.Port()
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(u.Hostname(), p)
}

func (h *HostFetch) trusted(addr string) bool {
	k := hostPortKey(addr)
	if k == "" {
		return false
	}
	if _, ok := h.proxies.Load(k); ok {
		return true
	}
	for _, t := range h.Trusted {
		if hostPortKey(t) == k {
			return true
		}
	}
	return false
}

// DialContext dials addr ("host:port"), refusing a non-public address
// unless addr is trusted.
func (h *HostFetch) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: h.Resolver}
	if !h.trusted(addr) {
		d.Control = func(_, address string, _ syscall.RawConn) error { return h.check(addr, address) }
	}
	return d.DialContext(ctx, network, addr)
}

// checkDialed refuses address (the "ip:port" about to be connected) when
// it is not public; name is what was asked for.
func checkDialed(name, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: unreadable address %q", ErrPrivateAddress, name, address)
	}
	if r := BlockedReason(ap.Addr()); r != "" {
		return fmt.Errorf("%w: %s is %s, a %s (only a registry the configuration names may be one)", ErrPrivateAddress, name, ap.Addr(), r)
	}
	return nil
}

// check is checkDialed, and refuses the host's own addresses and
// networks too.
func (h *HostFetch) check(name, address string) error {
	if err := checkDialed(name, address); err != nil {
		return err
	}
	if ap, _ := netip.ParseAddrPort(address); h.local.has(ap.Addr()) {
		return fmt.Errorf("%w: %s is %s, an address of this host or its network (only a registry the configuration names may be one)", ErrPrivateAddress, name, ap.Addr())
	}
	return nil
}

// Transport is http.DefaultTransport's settings, the environment's proxy
// included, dialing through h. A proxy the environment names is the
// user's and is dialed unchecked; behind it the proxy resolves names, so
// only a target given as an address is checked then.
func (h *HostFetch) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = h.DialContext
	t.DialTLSContext = nil
	t.Proxy = wrapEnvProxy(h, t.Proxy)
	return t
}

// wrapEnvProxy wraps env (the environment's proxy choice): the proxy it
// names becomes trusted for the dial, and a target address it would hand
// the proxy is checked first.
func wrapEnvProxy(h *HostFetch, env func(*http.Request) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	return func(req *http.Request) (*url.URL, error) {
		if env == nil {
			return nil, nil
		}
		p, err := env(req)
		if p == nil || err != nil {
			return p, err
		}
		target := URLHostPort(req.URL)
		if ip, perr := netip.ParseAddr(req.URL.Hostname()); perr == nil && !h.trusted(target) {
			if err := h.check(target, netip.AddrPortFrom(ip, 0).String()); err != nil {
				return nil, err
			}
		}
		if k := hostPortKey(URLHostPort(p)); k != "" {
			h.proxies.Store(k, true)
		}
		return p, nil
	}
}
