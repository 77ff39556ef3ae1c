package egressproxy

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

// BenchmarkConnect measures one CONNECT, a 1 KiB echo and the close,
// through the shared proxy with a pod's token against the same through a
// sandbox's own egress.Proxy (the baseline, measured in the same run):
// "ratio" is what the token check and the hand-over to the pod's proxy
// cost per connection.
func BenchmarkConnect(b *testing.B) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	port := echo.Addr().(*net.TCPAddr).Port
	target := fmt.Sprintf("127.0.0.1:%d", port)
	rules := []egress.Rule{{CIDR: netip.MustParsePrefix("127.0.0.1/32"), Ports: []int{port}}}

	plain, err := egress.New(egress.Options{Rules: rules})
	if err != nil {
		b.Fatal(err)
	}
	key, _ := NewKey()
	shared, err := New(Options{Config: Config{Key: key, Servers: map[string]ServerPolicy{"s": {Rules: rules}}}})
	if err != nil {
		b.Fatal(err)
	}
	addrs := map[string]string{}
	for name, serve := range map[string]func(net.Listener) error{"plain": plain.Serve, "shared": shared.Serve} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addrs[name] = l.Addr().String()
		go serve(l)
	}
	defer plain.Close()
	defer shared.Close()
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("pod:"+Sign(key, "pod", "s", time.Now().Add(time.Hour)))) + "\r\n"
	msg := make([]byte, 1024)
	one := func(addr, hdr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, hdr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		c.Write(msg)
		if _, err := io.ReadFull(br, msg); err != nil {
			b.Fatal(err)
		}
	}
	var tPlain, tShared time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		one(addrs["plain"], "")
		t1 := time.Now()
		one(addrs["shared"], auth)
		tShared += time.Since(t1)
		tPlain += t1.Sub(t0)
	}
	b.ReportMetric(float64(tPlain.Nanoseconds())/float64(b.N), "plain-ns/conn")
	b.ReportMetric(float64(tShared.Nanoseconds())/float64(b.N), "shared-ns/conn")
	b.ReportMetric(float64(tShared)/float64(tPlain), "ratio")
}
