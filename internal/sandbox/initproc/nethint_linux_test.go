package initproc

import (
	"strings"
	"testing"
)

// The counters as the kernel writes them (6.18), after two lookups and
// one connection to an address with no route.
const (
	snmpTried = `Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 8 0 0 0 0 0 8 8 1 1 0 0 0 0 0 0 0 8
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs
Icmp: 4 0 0 4
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 0 0 0 0 0 0 0 0 0 0 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 0 4 0 4 0 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 9 0 0 0 0 0 0 0
`
	snmp6Tried = `Ip6InReceives                   	0
Ip6OutNoRoutes                  	1
Udp6InDatagrams                 	0
Udp6NoPorts                     	0
`
)

func TestNetHint(t *testing.T) {
	h := netHint([]byte(snmpTried), []byte(snmp6Tried))
	for _, want := range []string{"4 DNS queries", "2 packets with no route", "--allow-host HOST", "network.egress"} {
		if !strings.Contains(h, want) {
			t.Errorf("hint %q lacks %q", h, want)
		}
	}
	if !strings.HasPrefix(h, "mcpbox: ") || !strings.HasSuffix(h, "\n") || strings.Count(h, "\n") != 1 {
		t.Errorf("hint %q is not one line of mcpbox's", h)
	}

	// Nothing tried: no hint, whatever else the counters say.
	quiet := strings.NewReplacer("Udp: 0 4 0 4", "Udp: 7 0 0 7", "8 1 1 0 0", "8 1 0 0 0").Replace(snmpTried)
	if h := netHint([]byte(quiet), []byte("Ip6OutNoRoutes 0\nUdp6NoPorts 0\n")); h != "" {
		t.Errorf("hint without a try: %q", h)
	}
	// One of each, IPv6 only.
	if h := netHint(nil, []byte("Ip6OutNoRoutes 1\nUdp6NoPorts 1\n")); !strings.Contains(h, "(1 DNS query, 1 packet with no route)") {
		t.Errorf("hint %q", h)
	}
	// Unreadable or malformed counters say nothing.
	for _, bad := range []string{"", "Udp: NoPorts\n", "Udp: NoPorts\nUdp: x\n", "Udp: NoPorts\nTcp: 5\n", "Udp6NoPorts\n"} {
		if h := netHint([]byte(bad), []byte(bad)); h != "" {
			t.Errorf("%q: hint %q", bad, h)
		}
	}
}
