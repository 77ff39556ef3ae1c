package egress

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// startSink runs a TCP server that reads to EOF and answers with the byte
// count, so a transfer is timed until the last byte arrived.
func startSink(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				c.Write(binary.BigEndian.AppendUint64(nil, uint64(n)))
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// dialer opens a fresh connection to the target port, via the proxy or not.
type dialer func(b *testing.B) net.Conn

func benchDialers(b *testing.B, port int) (map[string]dialer, *Proxy) {
	p, sock := startProxy(b, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}})
	target := fmt.Sprintf("127.0.0.1:%d", port)
	return map[string]dialer{
		"direct": func(b *testing.B) net.Conn {
			c, err := net.Dial("tcp", target)
			if err != nil {
				b.Fatal(err)
			}
			return c
		},
		"proxy": func(b *testing.B) net.Conn {
			c, code, _, err := connectErr(sock, target)
			if err != nil || code != http.StatusOK {
				b.Fatalf("CONNECT: %d %v", code, err)
			}
			c.SetDeadline(time.Time{})
			return c
		},
	}, p
}

func BenchmarkThroughput(b *testing.B) {
	const size = 1 << 30 // the 1 GiB transfer
	port := startSink(b)
	buf := make([]byte, 256<<10)
	for _, name := range []string{"direct", "proxy"} {
		dialers, _ := benchDialers(b, port)
		dial := dialers[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				c := dial(b)
				for sent := 0; sent < size; sent += len(buf) {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				c.(interface{ CloseWrite() error }).CloseWrite()
				var n [8]byte
				if _, err := io.ReadFull(c, n[:]); err != nil || binary.BigEndian.Uint64(n[:]) != size {
					b.Fatalf("sink got %d bytes, %v", binary.BigEndian.Uint64(n[:]), err)
				}
				c.Close()
			}
		})
	}
}

// BenchmarkConnectLatency: a new connection and one echoed byte per op.
func BenchmarkConnectLatency(b *testing.B) {
	port := startEcho(b, "127.0.0.1:0")
	for _, name := range []string{"direct", "proxy"} {
		dialers, _ := benchDialers(b, port)
		dial := dialers[name]
		b.Run(name, func(b *testing.B) {
			one := make([]byte, 1)
			for b.Loop() {
				c := dial(b)
				if _, err := c.Write(one); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, one); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

// BenchmarkIdleConnMemory reports heap and stack bytes per open idle
// connection, client and echo server included; the proxy's share is the
// difference between the two cases.
func BenchmarkIdleConnMemory(b *testing.B) {
	const n = 500
	port := startEcho(b, "127.0.0.1:0")
	for _, name := range []string{"direct", "proxy"} {
		dialers, p := benchDialers(b, port)
		dial := dialers[name]
		b.Run(name, func(b *testing.B) {
			var perConn float64
			for b.Loop() {
				before := memInUse()
				conns := make([]net.Conn, n)
				one := []byte{1}
				for i := range conns {
					conns[i] = dial(b)
					conns[i].Write(one) // make sure the relay is running
					io.ReadFull(conns[i], one)
				}
				perConn = float64(memInUse()-before) / n
				for _, c := range conns {
					c.Close()
				}
				for deadline := time.Now().Add(waitFor); p.ActiveConns() != 0 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
			b.ReportMetric(perConn, "bytes/conn")
		})
	}
}

func memInUse() int64 {
	runtime.GC()
	runtime.GC() // the second empties sync.Pool's victim cache
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
