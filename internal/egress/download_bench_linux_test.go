package egress

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// startSource runs a TCP server that writes size bytes to every
// connection and closes it.
func startSource(b *testing.B, size int64) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	chunk := make([]byte, 1<<20)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := size; left > 0; {
					n, err := c.Write(chunk[:min(left, int64(len(chunk)))])
					if err != nil {
						return
					}
					left -= int64(n)
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// BenchmarkDownloadRelay: a download through a CONNECT tunnel, the client
// on the unix socket (as the init was) or a TCP connection handed over (as
// the init's are), moved by splice or by copies,
// against the same download without the proxy in the same run.
//
//	go test ./internal/egress -run '^$' -bench DownloadRelay -count 6
func BenchmarkDownloadRelay(b *testing.B) {
	const size = 256 << 20
	port := startSource(b, size)
	target := fmt.Sprintf("127.0.0.1:%d", port)
	_, sock := startProxy(b, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}})
	// Byte limits far above the transfer: every chunk takes and settles a
	// reservation of the budget.
	_, limitedSock := startProxy(b, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Limits: Limits{MaxBytesPerConn: 1 << 50, MaxBytesTotal: 1 << 50}})
	read := func(b *testing.B, c net.Conn) time.Duration {
		start := time.Now()
		n, err := io.Copy(io.Discard, c)
		if err != nil || n != size {
			b.Fatalf("read %d bytes, %v", n, err)
		}
		c.Close()
		return time.Since(start)
	}
	direct := func(b *testing.B) time.Duration {
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		return read(b, c)
	}
	tunnel := func(b *testing.B, c net.Conn) net.Conn {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		head := make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))
		if _, err := io.ReadFull(c, head); err != nil || string(head[9:12]) != "200" {
			b.Fatalf("CONNECT: %q %v", head, err)
		}
		return c
	}
	viaUnix := func(b *testing.B) net.Conn {
		c, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		return tunnel(b, c)
	}
	viaLimited := func(b *testing.B) net.Conn {
		c, err := net.Dial("unix", limitedSock)
		if err != nil {
			b.Fatal(err)
		}
		return tunnel(b, c)
	}
	// As the init does since it stopped relaying: the workload's own TCP
	// connection handed over, the proxy relaying to it directly.
	handed := func(sock string) func(*testing.B) net.Conn {
		return func(b *testing.B) net.Conn { return tunnel(b, handOver(b, sock, "")) }
	}
	// As the init did before: the workload's TCP connection relayed to
	// the unix socket by a copy loop of its own (io.Copy, which splices).
	relayed := func(b *testing.B) net.Conn {
		d, a := tcpPair(b)
		p := viaUnix(b)
		go func() {
			defer a.Close()
			defer p.Close()
			go io.Copy(p, a)
			io.Copy(a, p)
		}()
		return d
	}
	for _, tc := range []struct {
		name   string
		dial   func(*testing.B) net.Conn
		splice bool
	}{
		{"unix-copy", viaUnix, false},
		{"unix-splice", viaUnix, true},
		{"unix-splice-limited", viaLimited, true},
		{"unix-copy-limited", viaLimited, false},
		{"init-relay-splice", relayed, true},
		{"handover-splice", handed(sock), true},
		{"handover-splice-limited", handed(limitedSock), true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			spliceRelays = tc.splice
			defer func() { spliceRelays = true }()
			b.SetBytes(size)
			var base, via time.Duration
			for b.Loop() {
				base += direct(b)
				via += read(b, tc.dial(b))
			}
			b.ReportMetric(float64(base)/float64(via), "ratio")
		})
	}
}
