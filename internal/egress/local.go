package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// The host's own addresses are refused like loopback whatever their range:
// a public or documentation-range address of this machine reaches every
// service it binds to 0.0.0.0. The set is read from the interfaces and
// kept for localTTL, since addresses change rarely and a lookup per
// connection would cost a netlink dump.
const localTTL = 10 * time.Second

type localAddrs struct {
	mu      sync.Mutex
	addrs   map[netip.Addr]bool // guarded by mu
	expires time.Time           // guarded by mu
	// list returns the interface addresses; tests replace it.
	list func() ([]net.Addr, error)
}

// has reports whether a is an address of this host.
func (l *localAddrs) has(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Now().After(l.expires) {
		l.refresh()
	}
	return l.addrs[a.Unmap()]
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
	addrs := make(map[netip.Addr]bool, len(ifaddrs))
	for _, ia := range ifaddrs {
		if pn, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(pn.IP); ok {
				addrs[a.Unmap()] = true
			}
		}
	}
	l.addrs, l.expires = addrs, time.Now().Add(localTTL)
}

// blocked is blockedReason plus the host's own addresses.
func (p *policy) blocked(a netip.Addr) string {
	if r := blockedReason(a); r != "" {
		return r
	}
	if p.local.has(a) {
		return "address of this host"
	}
	return ""
}
