package podagent

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"mcpbox/internal/egress"
)

// BenchmarkEgressFront measures what the agent's front costs a pod's
// traffic: a CONNECT with a 1 KiB echo and the close (op=connect), and 8
// MiB down a tunnel (op=bulk), straight to an authorizing egress front
// as before (via=direct) and through the agent's front, which adds the
// token (via=agent). Compare with benchstat -col /via.
func BenchmarkEgressFront(b *testing.B) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Close()
	const bulk = 8 << 20
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var op [1]byte
				if _, err := io.ReadFull(c, op[:]); err != nil {
					return
				}
				if op[0] == 'b' {
					io.CopyN(c, zeros{}, bulk)
					return
				}
				c.Write(op[:]) // the echo's first byte
				io.Copy(c, c)
			}()
		}
	}()
	port := echo.Addr().(*net.TCPAddr).Port
	target := fmt.Sprintf("127.0.0.1:%d", port)
	pod, err := egress.New(egress.Options{Rules: []egress.Rule{{CIDR: netip.MustParsePrefix("127.0.0.1/32"), Ports: []int{port}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer pod.Close()
	front, err := egress.New(egress.Options{RenewTarget: ProxyRenewTarget,
		Authorize: func(user, pass string, _ net.Addr) (*egress.Proxy, error) {
			if user != "pod" || pass != "tok" {
				return nil, fmt.Errorf("refused")
			}
			return pod, nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer front.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go front.Serve(l)
	agent, err := newEgressFront(Proxy{Addr: l.Addr().String(), User: "pod", Token: "tok"})
	if err != nil {
		b.Fatal(err)
	}
	defer agent.close()
	vias := []struct{ name, addr, auth string }{
		{"direct", l.Addr().String(), basic("pod", "tok")},
		{"agent", agent.ln.Addr().String(), basic(agent.localUser, agent.localPass)},
	}
	tunnel := func(b *testing.B, addr, auth string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, auth)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c, br
	}
	msg := make([]byte, 1024)
	msg[0] = 'e'
	for _, v := range vias {
		b.Run("op=connect/via="+v.name, func(b *testing.B) {
			for b.Loop() {
				c, br := tunnel(b, v.addr, v.auth)
				c.Write(msg)
				if _, err := io.ReadFull(br, msg); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
	for _, v := range vias {
		b.Run("op=bulk/via="+v.name, func(b *testing.B) {
			b.SetBytes(bulk)
			for b.Loop() {
				c, br := tunnel(b, v.addr, v.auth)
				c.Write([]byte{'b'})
				if n, err := io.Copy(io.Discard, br); err != nil || n != bulk {
					b.Fatalf("%d bytes, %v", n, err)
				}
				c.Close()
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
