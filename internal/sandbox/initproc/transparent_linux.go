package initproc

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Transparent egress: programs that ignore HTTP_PROXY (Node before 22.21,
// Go programs with a transport of their own, raw sockets) still reach
// allowed hosts through the proxy, by name, on the privileged ports the
// egress rules name (80 and 443 by default).
//
// The sandbox's resolv.conf names 127.0.0.1, where the init answers every
// A query with an address of its own in fakeNet, one per name, and every
// other query with no record (so clients use IPv4). It asks no one: the
// name goes nowhere, so a lookup cannot carry data out. The init listens
// on 0.0.0.0 on each transparent port; a connection to a fake address is
// handed to the proxy with the name and port as its target, exactly as a
// forward's (handOver), and the proxy decides it as it decides a CONNECT
// to that name: the allowlist, the resolution on the host, the checks of
// every address, the log line, the byte budget. A connection to any other
// address of the sandbox on those ports is closed. The ports are below
// 1024, which the workload, without capabilities, cannot bind itself, so
// the listeners take nothing from it.
//
// The DNS socket and the transparent listeners are served by the init's
// one egress goroutine, with the proxy port and the forwards
// (forward_linux.go).

// fakeNet holds the addresses the init gives names: 127.128.0.0/9, on the
// sandbox's loopback (the whole of 127/8 is local), away from 127.0.0.1
// and the low addresses forwards listen on.
var fakeNet = netip.MustParsePrefix("127.128.0.0/9")

// maxNames bounds the names the table holds at once (at most about 1 MiB
// of names). A full table makes room by forgetting the name used least
// recently, if it has rested for evictAfter; otherwise (a flood of
// lookups) new names get SERVFAIL until one has. A forgotten name's
// address then leads nowhere; looked up again, the name gets a new one.
const maxNames = 4096

// evictAfter is how long a name must have gone unused (no lookup, no
// connection to its address) before a full table may forget it: five
// times the TTL of its answers, so that a client that honours the TTL,
// or overstays it a while, still reaches its name.
const evictAfter = 5 * dnsTTL * time.Second

// fakeSpan is the number of addresses in fakeNet; index 0 (the network's
// own address) and the last (127.255.255.255, loopback's broadcast
// address, which TCP cannot reach) are never given, so a sandbox's names
// get at most fakeSpan-2 addresses in its life.
const fakeSpan = 1 << (32 - 9)

// nameTable maps looked-up names to fake addresses and back. Each address
// is given once in the sandbox's life, in turn over fakeNet: a client
// holding the address of a name that was forgotten is refused, never led
// to another name. Once all are given (over 8 million names; at the
// fastest rate evictAfter allows, 4,096 new names per 5 minutes, about a
// week), new names get SERVFAIL. Only the serving goroutine uses it; it
// must not be copied once used (lru points at itself).
type nameTable struct {
	byName map[string]*nameEntry
	byAddr map[uint32]*nameEntry // by index: the address is fakeNet's base + index
	last   uint32                // the index given last
	// lru links the entries from the most recently used (lru.next) to
	// the least (lru.prev); lru itself is no entry.
	lru nameEntry
	now func() time.Time // time.Now; tests set it
}

type nameEntry struct {
	name       string
	index      uint32
	used       time.Time
	prev, next *nameEntry
}

// addr returns name's fake address, giving it one if it has none; false
// when the table is full of names used within evictAfter, or every
// address has been given.
func (t *nameTable) addr(name string) (netip.Addr, bool) {
	now := t.clock()
	if e, ok := t.byName[name]; ok {
		t.touch(e, now)
		return fakeAddr(e.index), true
	}
	if t.byName == nil {
		t.byName, t.byAddr = map[string]*nameEntry{}, map[uint32]*nameEntry{}
		t.lru.prev, t.lru.next = &t.lru, &t.lru
	}
	if t.last >= fakeSpan-2 {
		return netip.Addr{}, false
	}
	if len(t.byName) >= maxNames {
		old := t.lru.prev
		if now.Sub(old.used) < evictAfter {
			return netip.Addr{}, false
		}
		t.unlink(old)
		delete(t.byName, old.name)
		delete(t.byAddr, old.index)
	}
	t.last++
	e := &nameEntry{name: name, index: t.last}
	t.byName[name], t.byAddr[e.index] = e, e
	t.touch(e, now)
	return fakeAddr(e.index), true
}

// name returns the name that was given address a, if the table still
// holds it; a connection to it counts as a use.
func (t *nameTable) name(a netip.Addr) (string, bool) {
	a = a.Unmap()
	if !a.Is4() || !fakeNet.Contains(a) {
		return "", false
	}
	b, base := a.As4(), fakeNet.Addr().As4()
	e := t.byAddr[binary.BigEndian.Uint32(b[:])-binary.BigEndian.Uint32(base[:])]
	if e == nil {
		return "", false
	}
	t.touch(e, t.clock())
	return e.name, true
}

func (t *nameTable) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// touch marks e used at now: the front of the list.
func (t *nameTable) touch(e *nameEntry, now time.Time) {
	e.used = now
	if e.prev != nil {
		t.unlink(e)
	}
	e.prev, e.next = &t.lru, t.lru.next
	t.lru.next.prev = e
	t.lru.next = e
}

func (t *nameTable) unlink(e *nameEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// fakeAddr is fakeNet's address at index i.
func fakeAddr(i uint32) netip.Addr {
	base := fakeNet.Addr().As4()
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(base[:])+i)
	return netip.AddrFrom4(a)
}

// DNS message constants (RFC 1035 4.1).
const (
	dnsHeaderLen = 12
	dnsTypeA     = 1
	dnsClassIN   = 1
	dnsTTL       = 60 // seconds; a name keeps its address while it is used (nameTable)

	rcodeOK       = 0
	rcodeFormErr  = 1
	rcodeServFail = 2
	rcodeNXDomain = 3
	rcodeNotImp   = 4
)

// maxDNSMessage is the largest query read; a UDP query without EDNS is
// at most 512 bytes, and a question fits in far less.
const maxDNSMessage = 512

// dnsAnswer returns the reply to query q, or nil if q is not worth one
// (too short for a header, or itself a reply). Every name gets an
// address in t (A) or no record (any other type); a malformed question
// gets FORMERR, an unsupported opcode NOTIMP, a name that is not a host
// name NXDOMAIN, and a full table SERVFAIL. It reads nothing past q.
func dnsAnswer(q []byte, t *nameTable) []byte {
	if len(q) < dnsHeaderLen || len(q) > maxDNSMessage || q[2]&0x80 != 0 {
		return nil
	}
	opcode := q[2] >> 3 & 0x0f
	if opcode != 0 {
		return dnsReply(q[:dnsHeaderLen], nil, rcodeNotImp, nil)
	}
	if binary.BigEndian.Uint16(q[4:]) != 1 {
		return dnsReply(q[:dnsHeaderLen], nil, rcodeFormErr, nil)
	}
	name, end, ok := dnsName(q, dnsHeaderLen)
	if !ok || end+4 > len(q) {
		return dnsReply(q[:dnsHeaderLen], nil, rcodeFormErr, nil)
	}
	question := q[dnsHeaderLen : end+4]
	qtype, qclass := binary.BigEndian.Uint16(q[end:]), binary.BigEndian.Uint16(q[end+2:])
	if name == "" || !hostName(name) {
		return dnsReply(q[:dnsHeaderLen], question, rcodeNXDomain, nil)
	}
	if qtype != dnsTypeA || qclass != dnsClassIN {
		return dnsReply(q[:dnsHeaderLen], question, rcodeOK, nil)
	}
	a, ok := t.addr(name)
	if !ok {
		return dnsReply(q[:dnsHeaderLen], question, rcodeServFail, nil)
	}
	ip := a.As4()
	return dnsReply(q[:dnsHeaderLen], question, rcodeOK, ip[:])
}

// dnsReply builds a reply to header h carrying question (nil: none) and,
// if ip is set, one A record for the question's name.
func dnsReply(h, question []byte, rcode byte, ip []byte) []byte {
	r := make([]byte, 0, dnsHeaderLen+len(question)+16)
	r = append(r, h[0], h[1])
	// QR, the query's opcode, AA; the query's RD; RA; rcode.
	r = append(r, 0x80|h[2]&0x78|0x04|h[2]&0x01, 0x80|rcode)
	qd, an := 0, 0
	if question != nil {
		qd = 1
	}
	if ip != nil {
		an = 1
	}
	r = binary.BigEndian.AppendUint16(r, uint16(qd))
	r = binary.BigEndian.AppendUint16(r, uint16(an))
	r = append(r, 0, 0, 0, 0) // no authority, no additional records
	r = append(r, question...)
	if ip != nil {
		r = append(r, 0xc0, dnsHeaderLen) // the name: a pointer to the question's
		r = binary.BigEndian.AppendUint16(r, dnsTypeA)
		r = binary.BigEndian.AppendUint16(r, dnsClassIN)
		r = binary.BigEndian.AppendUint32(r, dnsTTL)
		r = binary.BigEndian.AppendUint16(r, 4)
		r = append(r, ip...)
	}
	return r
}

// dnsName reads the uncompressed name at q[off:] (a question's name has
// no pointers) and returns it in lower case without the root's dot, and
// the offset just past it.
func dnsName(q []byte, off int) (name string, end int, ok bool) {
	var b []byte
	for {
		if off >= len(q) {
			return "", 0, false
		}
		n := int(q[off])
		off++
		if n == 0 {
			break
		}
		if n > 63 || off+n > len(q) || len(b)+n+1 > 254 {
			return "", 0, false // a pointer, a reserved label type, too long
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		for _, c := range q[off : off+n] {
			if c == '.' {
				return "", 0, false // a label with a dot would read as two
			}
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
		}
		off += n
	}
	if len(b) > 253 {
		return "", 0, false
	}
	return string(b), off, true
}

// hostName reports whether name is one a client may connect to by name:
// labels of letters, digits, '-' and '_', not all of it digits and dots
// (an address, which clients do not look up). Anything else would only
// be refused by the proxy later, or could not travel as a hand-over's
// target.
func hostName(name string) bool {
	digits := true
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', c == '-', c == '_':
			digits = false
		case '0' <= c && c <= '9':
		default:
			return false
		}
		label++
	}
	return label > 0 && !digits
}

// listenDNS opens the DNS socket on 127.0.0.1:53, non-blocking. The init
// needs CAP_NET_BIND_SERVICE in the sandbox's user namespace for it.
func listenDNS() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 53, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// answerDNS replies to the queries waiting on the DNS socket fd.
func answerDNS(fd int, buf []byte, names *nameTable) {
	for range 64 { // then poll again, so the listeners are not starved
		n, from, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if r := dnsAnswer(buf[:n], names); r != nil && from != nil {
			_ = unix.Sendto(fd, r, unix.MSG_DONTWAIT, from)
		}
	}
}

// transparentTarget is the hand-over target of connection c accepted on
// a transparent port: the name its local address was given, and the
// port; false for an address no name has.
func transparentTarget(c int, names *nameTable) (string, bool) {
	sa, err := unix.Getsockname(c)
	in4, ok := sa.(*unix.SockaddrInet4)
	if err != nil || !ok {
		return "", false
	}
	name, known := names.name(netip.AddrFrom4(in4.Addr))
	if !known {
		return "", false
	}
	return name + ":" + strconv.Itoa(in4.Port), true
}
