package egress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// socksRequest builds a SOCKS5 CONNECT request for host (IPv4, IPv6 or a
// domain) and port.
func socksRequest(host string, port int) []byte {
	req := []byte{5, 1, 0}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		b := a.As4()
		req = append(append(req, 1), b[:]...)
	} else if err == nil {
		b := a.As16()
		req = append(append(req, 4), b[:]...)
	} else {
		req = append(append(req, 3, byte(len(host))), host...)
	}
	return binary.BigEndian.AppendUint16(req, uint16(port))
}

// socksDial performs the handshake and returns the reply code.
func socksDial(t *testing.T, sock string, req []byte) (net.Conn, byte) {
	t.Helper()
	c := dialUnix(t, sock)
	c.Write([]byte{5, 1, 0})
	sel := make([]byte, 2)
	if _, err := io.ReadFull(c, sel); err != nil || !bytes.Equal(sel, []byte{5, 0}) {
		t.Fatalf("method selection = %v, %v", sel, err)
	}
	c.Write(req)
	reply := make([]byte, 10)
	if _, err := io.ReadFull(c, reply); err != nil {
		t.Fatalf("reading SOCKS reply: %v", err)
	}
	if reply[0] != 5 {
		t.Fatalf("reply version %d", reply[0])
	}
	return c, reply[1]
}

func TestSOCKS5(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	port6 := startEcho(t, "[::1]:0")
	res := newResolver(map[string][]string{"echo.test": {"127.0.0.1"}, "private.test": {"10.0.0.1"}})
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules: []Rule{
			{Host: "127.0.0.1", Ports: []int{port}},
			{Host: "::1", Ports: []int{port6}},
			{Host: "echo.test", Ports: []int{port}, CIDR: netip.MustParsePrefix("127.0.0.0/8")},
			{Host: "*.test"},
			{Host: "*"},
		},
		Resolver: res,
		Log:      ev.log,
	})
	tests := []struct {
		host   string
		port   int
		code   byte
		reason string
	}{
		{host: "127.0.0.1", port: port},
		{host: "::1", port: port6},
		{host: "echo.test", port: port},
		{host: "127.0.0.1", port: 443, code: socksNotAllowed, reason: "loopback"},
		{host: "169.254.169.254", port: 80, code: socksNotAllowed, reason: "link-local"},
		{host: "::ffff:127.0.0.1", port: 443, code: socksNotAllowed, reason: "IPv4-mapped"},
		{host: "2130706433", port: 443, code: socksNotAllowed, reason: "loopback"},
		{host: "private.test", port: 443, code: socksNotAllowed, reason: "private"},
		{host: "unresolvable.test", port: 443, code: socksHostUnreachable, reason: "resolving"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s:%d", tt.host, tt.port), func(t *testing.T) {
			c, code := socksDial(t, sock, socksRequest(tt.host, tt.port))
			if code != tt.code {
				t.Fatalf("reply code = %d, want %d", code, tt.code)
			}
			if code == socksSucceeded {
				echoOnce(t, c, "socks payload")
			}
			c.Close()
			e := ev.next(t)
			if e.Kind != "socks" || !strings.Contains(e.Reason, tt.reason) || (tt.code == 0) != (e.Reason == "") {
				t.Errorf("event = %+v, want kind socks, reason containing %q", e, tt.reason)
			}
		})
	}
}

func TestSOCKS5Refusals(t *testing.T) {
	checkNoLeak(t)
	ev := newEvents()
	_, sock := startProxy(t, Options{Rules: []Rule{{Host: "*"}}, Log: ev.log})
	t.Run("no acceptable method", func(t *testing.T) {
		c := dialUnix(t, sock)
		c.Write([]byte{5, 1, 2}) // username/password only
		got, _ := io.ReadAll(c)
		if !bytes.Equal(got, []byte{5, 0xff}) {
			t.Errorf("reply = %v, want [5 255] and close", got)
		}
		ev.next(t)
	})
	for _, tt := range []struct {
		name string
		req  []byte
		code byte
	}{
		{"bind command", []byte{5, 2, 0, 1, 8, 8, 8, 8, 0, 80}, socksCmdNotSupported},
		{"udp associate", []byte{5, 3, 0, 1, 8, 8, 8, 8, 0, 80}, socksCmdNotSupported},
		{"bad address type", []byte{5, 1, 0, 9, 8, 8, 8, 8, 0, 80}, socksAddrTypeNotSupport},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, code := socksDial(t, sock, tt.req); code != tt.code {
				t.Errorf("reply code = %d, want %d", code, tt.code)
			}
			if e := ev.next(t); e.Decision != "deny" {
				t.Errorf("event = %+v, want deny", e)
			}
		})
	}
}
