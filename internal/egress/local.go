package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// The host's own addresses are refused like loopback whatever their range:
// a public or documentation-range address of this machine reaches every
// service it binds to 0.0.0.0. So are the networks its interfaces are on
// (its LAN neighbours: gateway, other tenants), and IPv6 forms embedding
// any of those. The set is read from the interfaces and kept for
// localTTL, since addresses change rarely and a lookup per connection
// would cost a netlink dump.
const localTTL = 10 * time.Second

type localAddrs struct {
	mu      sync.Mutex
	nets    []netip.Prefix // guarded by mu: interface networks (addresses included)
	expires time.Time      // guarded by mu
	// list returns the interface addresses; tests replace it.
	list func() ([]net.Addr, error)
}

// has reports whether a is an address of this host or on one of its
// networks, directly or embedded in an IPv6 form.
func (l *localAddrs) has(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Now().After(l.expires) {
		l.refresh()
	}
	cands := []netip.Addr{a.Unmap()}
	if v4, ok := embeddedV4(a); ok {
		cands = append(cands, v4)
	}
	for _, c := range cands {
		for _, n := range l.nets {
			if n.Contains(c) {
				return true
			}
		}
	}
	return false
}

// refresh re-reads the addresses. Preconditions: l.mu is held. On error it
// keeps the old set (or none): the range checks still apply.
func (l *localAddrs) refresh() {
	list := l.list
	if list == nil {
		list = net.InterfaceAddrs
	}
	ifaddrs, err := list()
	if err != nil {
		return
	}
	var nets []netip.Prefix
	for _, ia := range ifaddrs {
		pn, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, ok := netip.AddrFromSlice(pn.IP)
		if !ok {
			continue
		}
		a = a.Unmap()
		ones, _ := pn.Mask.Size()
		if a.Is4() && ones > 32 {
			ones -= 96
		}
		if p, err := a.Prefix(ones); err == nil {
			nets = append(nets, p)
		}
		nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
	}
	l.nets, l.expires = nets, time.Now().Add(localTTL)
}

// blocked is BlockedReason plus the host's own addresses.
func (p *policy) blocked(a netip.Addr) string {
	if r := BlockedReason(a); r != "" {
		return r
	}
	if p.local.has(a) {
		return "address of this host or its network"
	}
	return ""
}
