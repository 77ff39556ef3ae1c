package initproc

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// query builds a DNS query for name and type with package dnsmessage, an
// implementation independent of the init's.
func query(t testing.TB, id uint16, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// parse reads a reply with package dnsmessage.
func parse(t testing.TB, r []byte) dnsmessage.Message {
	t.Helper()
	var m dnsmessage.Message
	if err := m.Unpack(r); err != nil {
		t.Fatalf("reply does not parse: %v (% x)", err, r)
	}
	return m
}

func TestDNSAnswer(t *testing.T) {
	var names nameTable
	// An A query gets one address in fakeNet, the same each time, in any
	// case, and a different one for another name.
	m := parse(t, dnsAnswer(query(t, 7, "Api.Example.COM.", dnsmessage.TypeA), &names))
	if !m.Response || m.ID != 7 || m.RCode != dnsmessage.RCodeSuccess || !m.RecursionDesired || !m.Authoritative {
		t.Fatalf("header %+v", m.Header)
	}
	if len(m.Questions) != 1 || m.Questions[0].Name.String() != "Api.Example.COM." {
		t.Fatalf("question not echoed: %+v", m.Questions)
	}
	if len(m.Answers) != 1 {
		t.Fatalf("answers %+v, want one", m.Answers)
	}
	a, ok := m.Answers[0].Body.(*dnsmessage.AResource)
	if !ok || m.Answers[0].Header.Name.String() != "Api.Example.COM." {
		t.Fatalf("answer %+v", m.Answers[0])
	}
	addr := netip.AddrFrom4(a.A)
	if !fakeNet.Contains(addr) {
		t.Fatalf("address %v outside %v", addr, fakeNet)
	}
	if n, ok := names.name(addr); !ok || n != "api.example.com" {
		t.Fatalf("address %v leads to %q %v, want api.example.com", addr, n, ok)
	}
	again := parse(t, dnsAnswer(query(t, 8, "api.example.com.", dnsmessage.TypeA), &names))
	if b := again.Answers[0].Body.(*dnsmessage.AResource); b.A != a.A {
		t.Fatalf("second lookup gave %v, first %v", b.A, a.A)
	}
	other := parse(t, dnsAnswer(query(t, 9, "other.example.com.", dnsmessage.TypeA), &names))
	if b := other.Answers[0].Body.(*dnsmessage.AResource); b.A == a.A {
		t.Fatalf("two names share %v", b.A)
	}

	// Any other type: success without a record, so clients fall back to
	// the A answer; no name gets an address from it.
	for _, typ := range []dnsmessage.Type{dnsmessage.TypeAAAA, dnsmessage.TypeMX, dnsmessage.TypeTXT, 65} {
		m := parse(t, dnsAnswer(query(t, 10, "new.example.com.", typ), &names))
		if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 || len(m.Questions) != 1 {
			t.Fatalf("type %v: %+v", typ, m)
		}
	}
	if len(names.byName) != 2 {
		t.Fatalf("table holds %d names, want the two looked up by A", len(names.byName))
	}

	// Names that are no host names.
	for _, name := range []string{"a b.example.", "x\\.y.", "1.2.3.4.", "_.", "a/b.", "caf\xc3\xa9."} {
		r := dnsAnswer(query(t, 11, name, dnsmessage.TypeA), &names)
		if r == nil {
			t.Fatalf("%q: no reply", name)
		}
		m := parse(t, r)
		if name == "_." {
			if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
				t.Fatalf("%q: %+v", name, m)
			}
			continue
		}
		if len(m.Answers) != 0 || m.RCode == dnsmessage.RCodeSuccess {
			t.Fatalf("%q answered: %+v", name, m)
		}
	}
}

func TestDNSAnswerMalformed(t *testing.T) {
	var names nameTable
	q := query(t, 1, "example.com.", dnsmessage.TypeA)
	cases := map[string]struct {
		q     []byte
		rcode int // -1: no reply at all
	}{
		"empty":             {nil, -1},
		"short header":      {q[:11], -1},
		"a reply":           {append([]byte{0, 1, 0x80}, q[3:]...), -1},
		"too long":          {append(append([]byte{}, q...), make([]byte, 600)...), -1},
		"no question":       {append([]byte{0, 1, 1, 0, 0, 0}, q[6:12]...), int(dnsmessage.RCodeFormatError)},
		"two questions":     {append(append([]byte{0, 1, 1, 0, 0, 2}, q[6:]...), q[12:]...), int(dnsmessage.RCodeFormatError)},
		"cut name":          {q[:15], int(dnsmessage.RCodeFormatError)},
		"no type":           {q[:len(q)-4], int(dnsmessage.RCodeFormatError)},
		"pointer":           {append(append([]byte{}, q[:12]...), 0xc0, 12, 0, 1, 0, 1), int(dnsmessage.RCodeFormatError)},
		"label over 63":     {append(append(append([]byte{}, q[:12]...), 64), make([]byte, 70)...), int(dnsmessage.RCodeFormatError)},
		"inverse query":     {append([]byte{0, 1, 0x08}, q[3:]...), int(dnsmessage.RCodeNotImplemented)},
		"name over 253":     {longName(q[:12], 130), int(dnsmessage.RCodeFormatError)},
		"name just fitting": {longName(q[:12], 126), int(dnsmessage.RCodeSuccess)},
	}
	for name, c := range cases {
		r := dnsAnswer(c.q, &names)
		if c.rcode < 0 {
			if r != nil {
				t.Errorf("%s: replied % x", name, r)
			}
			continue
		}
		if r == nil {
			t.Errorf("%s: no reply", name)
			continue
		}
		var p dnsmessage.Parser
		h, err := p.Start(r)
		if err != nil {
			t.Errorf("%s: reply does not parse: %v", name, err)
			continue
		}
		if int(h.RCode) != c.rcode || !h.Response {
			t.Errorf("%s: rcode %v response %v, want %v", name, h.RCode, h.Response, c.rcode)
		}
	}
}

// longName is header h with a question of n labels "a": a name of 2n-1
// characters.
func longName(h []byte, n int) []byte {
	q := append([]byte{}, h...)
	for range n {
		q = append(q, 1, 'a')
	}
	return append(q, 0, 0, 1, 0, 1)
}

func TestNameTableFull(t *testing.T) {
	now := time.Unix(1e9, 0)
	names := nameTable{now: func() time.Time { return now }}
	name := func(i int) string {
		return "n" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "-" + strconv.Itoa(i)
	}
	addrs := map[netip.Addr]int{}
	for i := range maxNames {
		a, ok := names.addr(name(i))
		if !ok {
			t.Fatalf("name %d refused", i)
		}
		if !fakeNet.Contains(a) {
			t.Fatalf("address %v outside %v", a, fakeNet)
		}
		if j, dup := addrs[a]; dup {
			t.Fatalf("names %d and %d share %v", j, i, a)
		}
		addrs[a] = i
	}
	first, _ := names.addr(name(0)) // name 0 is now the most recently used

	// Full of names used within evictAfter: a new name is refused, known
	// names still answer.
	now = now.Add(evictAfter - time.Second)
	m := parse(t, dnsAnswer(query(t, 3, "one-more.example.", dnsmessage.TypeA), &names))
	if m.RCode != dnsmessage.RCodeServerFailure || len(m.Answers) != 0 {
		t.Fatalf("a full table of recent names answered %+v", m)
	}
	if a, ok := names.addr(name(0)); !ok || a != first {
		t.Fatalf("a known name in a full table: %v, %v; want %v", a, ok, first)
	}

	// Once the least recently used name (name 1: name 0 was used since)
	// has rested evictAfter, a new name takes its place: a new address,
	// and the old one leads nowhere.
	old := fakeAddr(names.byName[name(1)].index)
	now = time.Unix(1e9, 0).Add(evictAfter)
	a, ok := names.addr("one-more.example")
	if !ok {
		t.Fatal("a new name refused after the oldest rested evictAfter")
	}
	if _, taken := addrs[a]; taken || a == old {
		t.Fatalf("the new name got %v, an address given before", a)
	}
	if n, ok := names.name(old); ok {
		t.Fatalf("a forgotten name's address %v leads to %q", old, n)
	}
	if _, ok := names.byName[name(1)]; ok {
		t.Fatal("the least recently used name was kept")
	}
	if n, ok := names.name(first); !ok || n != name(0) {
		t.Fatalf("name 0's address leads to %q, %v", n, ok)
	}
	if len(names.byName) != maxNames || len(names.byAddr) != maxNames {
		t.Fatalf("table holds %d names, %d addresses; want %d", len(names.byName), len(names.byAddr), maxNames)
	}

	// A connection counts as a use: name 2, connected to, outlives name 3.
	now = now.Add(evictAfter)
	if _, ok := names.name(fakeAddr(names.byName[name(2)].index)); !ok {
		t.Fatal("name 2 lost")
	}
	if _, ok := names.addr("two-more.example"); !ok {
		t.Fatal("second new name refused")
	}
	if _, ok := names.byName[name(2)]; !ok {
		t.Fatal("a name just connected to was forgotten")
	}
	if _, ok := names.byName[name(3)]; ok {
		t.Fatal("name 3, unused longest, was kept")
	}

	checkLRU(t, &names)

	// Addresses outside the table lead nowhere.
	for _, a := range []string{"127.128.0.0", "127.0.0.1", "10.0.0.1", "::1", "127.255.255.255"} {
		if n, ok := names.name(netip.MustParseAddr(a)); ok {
			t.Errorf("%s leads to %q", a, n)
		}
	}
}

// checkLRU walks the table's list both ways: every entry once, each
// linked back, most recent first.
func checkLRU(t *testing.T, names *nameTable) {
	t.Helper()
	n := 0
	for e := names.lru.next; e != &names.lru; e = e.next {
		if e.next.prev != e || e.prev.next != e {
			t.Fatalf("entry %q badly linked", e.name)
		}
		if e.next != &names.lru && e.next.used.After(e.used) {
			t.Fatalf("%q, used %v, before %q, used later", e.name, e.used, e.next.name)
		}
		if names.byName[e.name] != e || names.byAddr[e.index] != e {
			t.Fatalf("entry %q not the table's", e.name)
		}
		if n++; n > len(names.byName) {
			t.Fatal("the list is longer than the table")
		}
	}
	if n != len(names.byName) {
		t.Fatalf("the list holds %d entries, the table %d", n, len(names.byName))
	}
}

// Each address is given once: past the last, new names are refused,
// even with forgettable names in the table, and known names still answer.
func TestNameTableExhausted(t *testing.T) {
	now := time.Unix(1e9, 0)
	names := nameTable{now: func() time.Time { return now }}
	a, ok := names.addr("kept.example")
	if !ok || a != fakeAddr(1) || a != netip.MustParseAddr("127.128.0.1") {
		t.Fatalf("first address %v, %v; want 127.128.0.1", a, ok)
	}
	names.last = fakeSpan - 3
	b, ok := names.addr("b.example")
	if !ok || b != fakeAddr(fakeSpan-2) || b != netip.MustParseAddr("127.255.255.254") {
		t.Fatalf("last address %v, %v; want 127.255.255.254", b, ok)
	}
	now = now.Add(evictAfter)
	if c, ok := names.addr("c.example"); ok {
		t.Fatalf("a name past the last address got %v", c)
	}
	if x, ok := names.addr("kept.example"); !ok || x != a {
		t.Fatalf("a known name: %v, %v; want %v", x, ok, a)
	}
	if n, ok := names.name(b); !ok || n != "b.example" {
		t.Fatalf("%v leads to %q, %v", b, n, ok)
	}
}

// FuzzDNSAnswer: any datagram gets no reply or one that parses, echoes
// the query's ID, and holds at most one answer, an address in fakeNet
// that leads back to the name asked.
func FuzzDNSAnswer(f *testing.F) {
	f.Add(query(f, 1, "example.com.", dnsmessage.TypeA))
	f.Add(query(f, 2, "example.com.", dnsmessage.TypeAAAA))
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, q []byte) {
		var names nameTable
		r := dnsAnswer(q, &names)
		if r == nil {
			return
		}
		m := parse(t, r)
		if m.ID != uint16(q[0])<<8|uint16(q[1]) || !m.Response {
			t.Fatalf("header %+v for query % x", m.Header, q)
		}
		if len(m.Answers) > 1 {
			t.Fatalf("%d answers", len(m.Answers))
		}
		for _, an := range m.Answers {
			a := netip.AddrFrom4(an.Body.(*dnsmessage.AResource).A)
			n, ok := names.name(a)
			if !ok || !hostName(n) || !strings.EqualFold(strings.TrimSuffix(m.Questions[0].Name.String(), "."), n) {
				t.Fatalf("answer %v leads to %q %v, question %v", a, n, ok, m.Questions)
			}
		}
	})
}
