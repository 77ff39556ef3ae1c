package credinject

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

// BenchmarkDownload moves a 256 MiB response through the proxy: over a
// plain CONNECT tunnel ("connect") and through the intercepting path
// ("intercept": TLS terminated, the response scanned for the value and
// TLS again). The target is intercept >= 0.8x connect.
//
// Every sub-benchmark after connect reports its speed against connect's
// in the same run: x-connect (wall time) and cpu-x-connect (CPU time of
// the whole process: client, proxy and server, which share the cores).
// The client speaks HTTP/1.1 (and the proxy the same upstream), as most
// bulk downloaders do; connect-h2 and intercept-h2 are the same with an
// HTTP/2 client, intercept-h2 measured against connect-h2.
// "crypto" is the least the intercepting path must add to connect: the
// proxy opens and seals every record once more, here with nothing else
// (AES-GCM with the key size of the suite the legs negotiated, 16 KiB
// records, one goroutine; "crypto-parallel" splits it over two;
// "crypto-copy" adds the receive and send copies, see newResealer). Its bound metric
// is connect / (connect + crypto): the best ratio the intercepting path
// can reach if that work cannot run beside connect's (cpu-bound: the same
// in CPU time). "relay-splice" and "relay-copy" add what the kernel does
// more when the proxy reads and writes the bytes instead of splicing them
// (no TLS, see newRelay); relay-copy's cpu-bound counts it with crypto's
// passes, and its cpu-legs is the ratio if the proxy's two TLS legs cost
// what the client's and the server's cost together (connect less its bare
// relay): what a proxy built on crypto/tls, as the client and the server
// are, can expect.
func BenchmarkDownload(b *testing.B) {
	const size = 256 << 20
	chunk := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog 0123456789 {}\":,.\n", 1024))
	var suites sync.Map // "upstream <port>" -> cipher suite the server negotiated
	serve := func(w http.ResponseWriter, r *http.Request) {
		suites.Store(r.Host, r.TLS.CipherSuite)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for sent := 0; sent < size; {
			n := min(len(chunk), size-sent)
			if _, err := w.Write(chunk[:n]); err != nil {
				return
			}
			sent += n
		}
	}
	cred := startUpstream(b, true, serve)
	plain := startUpstream(b, true, serve)
	r := startRig(b, pool(cred, plain), []egress.Rule{{Host: "127.0.0.1", Ports: []int{cred.port, plain.port}}},
		Credential{Name: "GH", Value: realA, Hosts: []string{cred.hostPort()}, Header: "Authorization", Format: "Bearer {value}"})
	ph, _ := r.set.Placeholder("GH")
	// The same interception with the response scan left out, to show what
	// the scan costs.
	noscan := startRigInjector(b, pool(cred), []egress.Rule{{Host: "127.0.0.1", Ports: []int{cred.port}}}, noFilter{r.set})
	var (
		suite uint16 // the connect leg's: every leg must match it
		// connect's wall and CPU time per op, by client protocol
		connWall, connCPU = map[bool]float64{}, map[bool]float64{}
		cryptoCPU         float64 // crypto's CPU time per op
	)
	ratios := func(b *testing.B, h2 bool, wall, cpu float64) {
		if connWall[h2] == 0 {
			return
		}
		b.ReportMetric(connWall[h2]/wall, "x-connect")
		b.ReportMetric(connCPU[h2]/cpu, "cpu-x-connect")
	}
	download := func(name string, u *upstream, c *http.Client, h2 bool) {
		c.Timeout = 0
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			cpu0 := cpuTime()
			for b.Loop() {
				req := newReq(b, "GET", "https://"+u.hostPort()+"/big", nil)
				req.Header.Set("Authorization", "Bearer "+ph)
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatalf("got %d bytes, %v", n, err)
				}
				up, _ := suites.Load(u.hostPort())
				if strings.HasPrefix(name, "connect") || suite == 0 {
					suite = resp.TLS.CipherSuite
				}
				if resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
					b.Fatalf("client spoke HTTP/%d", resp.ProtoMajor)
				}
				if resp.TLS.CipherSuite != suite || up != suite {
					b.Fatalf("cipher suites: client leg %s, server leg %s, connect %s: the comparison is not fair",
						tls.CipherSuiteName(resp.TLS.CipherSuite), tls.CipherSuiteName(up.(uint16)), tls.CipherSuiteName(suite))
				}
			}
			wall, cpu := float64(b.Elapsed())/float64(b.N), float64(cpuTime()-cpu0)/float64(b.N)
			b.ReportMetric(cpu, "cpu-ns/op")
			if strings.HasPrefix(name, "connect") {
				connWall[h2], connCPU[h2] = wall, cpu
				return
			}
			ratios(b, h2, wall, cpu)
		})
	}
	download("connect", plain, r.client(b, pool(plain), false), false)
	for _, v := range []struct {
		name    string
		workers int
		copies  bool
	}{{"crypto", 1, false}, {"crypto-parallel", 2, false}, {"crypto-copy", 1, true}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(size)
			reseal := newResealer(b, suite, v.copies)
			cpu0 := cpuTime()
			for b.Loop() {
				reseal(size, v.workers)
			}
			wall, cpu := float64(b.Elapsed())/float64(b.N), float64(cpuTime()-cpu0)/float64(b.N)
			b.ReportMetric(cpu, "cpu-ns/op")
			ratios(b, false, wall, cpu)
			if v.name == "crypto" {
				cryptoCPU = cpu
			}
			if cw := connWall[false]; cw != 0 {
				b.ReportMetric(cw/(cw+wall), "bound")
				b.ReportMetric(connCPU[false]/(connCPU[false]+cpu), "cpu-bound")
			}
		})
	}
	// The least the intercepting path adds in the kernel: the same relay
	// as connect's without TLS, spliced and copied through user space.
	relayCPU := map[bool]float64{}
	for _, copies := range []bool{false, true} {
		name := "relay-splice"
		if copies {
			name = "relay-copy"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			relay := newRelay(b, copies)
			cpu0 := cpuTime()
			for b.Loop() {
				relay(size)
			}
			cpu := float64(cpuTime()-cpu0) / float64(b.N)
			b.ReportMetric(cpu, "cpu-ns/op")
			relayCPU[copies] = cpu
			if c, cr := connCPU[false], cryptoCPU; copies && c != 0 && cr != 0 && relayCPU[false] != 0 {
				// connect's work plus the two passes plus what the copies
				// cost the kernel over splice.
				b.ReportMetric(c/(c+cr+cpu-relayCPU[false]), "cpu-bound")
				// The ratio if the proxy's two TLS legs cost what the
				// client's and the server's do together (connect less its
				// bare relay), plus those copies.
				b.ReportMetric(c/(c+c-relayCPU[false]+cpu-relayCPU[false]), "cpu-legs")
			}
		})
	}
	download("intercept", cred, r.client(b, nil, false), false)
	download("intercept-noscan", cred, noscan.client(b, nil, false), false)
	download("connect-h2", plain, r.client(b, pool(plain), true), true)
	download("intercept-h2", cred, r.client(b, nil, true), true)
}

// newResealer returns a function that does the proxy's added TLS work for
// size bytes: every 16 KiB record (as TLS 1.3 frames it: content type and
// tag) opened with one key and sealed with another, spread over workers
// goroutines. With copies, each record is also copied in before it is
// opened and out after it is sealed: the least a proxy in user space
// moves that splice, which connect uses, does not (the kernel's receive
// and send copies, here as memmove).
func newResealer(b *testing.B, suite uint16, copies bool) func(size, workers int) {
	keyLen := 0
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		keyLen = 16
	case tls.TLS_AES_256_GCM_SHA384:
		keyLen = 32
	default:
		b.Skipf("connect negotiated %s, not AES-GCM", tls.CipherSuiteName(suite))
	}
	aead := func(fill byte) cipher.AEAD {
		blk, err := aes.NewCipher([]byte(strings.Repeat(string(fill), keyLen)))
		if err != nil {
			b.Fatal(err)
		}
		g, err := cipher.NewGCM(blk)
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	const rec = 16 << 10
	in, out := aead(1), aead(2)
	nonce := make([]byte, in.NonceSize())
	sealed := in.Seal(nil, nonce, make([]byte, rec+1), nil) // what arrives from upstream
	return func(size, workers int) {
		var wg sync.WaitGroup
		per := (size + workers - 1) / workers
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				plain := make([]byte, 0, rec+1)
				buf := make([]byte, 0, rec+1+out.Overhead())
				recvd := make([]byte, len(sealed))
				sent := make([]byte, cap(buf))
				for done := w * per; done < min(size, (w+1)*per); done += rec {
					src := sealed
					if copies {
						copy(recvd, sealed)
						src = recvd
					}
					var err error
					if plain, err = in.Open(plain[:0], nonce, src, nil); err != nil {
						panic(err)
					}
					buf = out.Seal(buf[:0], nonce, plain, nil)
					if copies {
						copy(sent, buf)
					}
				}
			}()
		}
		wg.Wait()
	}
}

// newRelay returns a function that moves size bytes from a TCP server
// through a relay to a unix-socket client, as connect's tunnel does but
// without TLS: the server writes record-sized pieces, the relay splices
// them (io.Copy from a TCPConn to a UnixConn) or, with copies, reads and
// writes them through a 256 KiB buffer in user space. The difference is
// what the kernel's receive and send copies cost the intercepting path.
func newRelay(b *testing.B, copies bool) func(size int) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tl.Close() })
	ul, err := net.Listen("unix", filepath.Join(b.TempDir(), "relay"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ul.Close() })
	return func(size int) {
		errc := make(chan error, 2)
		go func() { // server
			c, err := tl.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			rec := make([]byte, 16<<10+22) // a TLS 1.3 record, header and tag
			for sent := 0; sent < size; sent += len(rec) {
				if _, err := c.Write(rec[:min(len(rec), size-sent)]); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		go func() { // relay
			up, err := net.Dial("tcp", tl.Addr().String())
			if err != nil {
				errc <- err
				return
			}
			defer up.Close()
			down, err := ul.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer down.Close()
			if copies {
				_, err = io.CopyBuffer(struct{ io.Writer }{down}, struct{ io.Reader }{up}, make([]byte, 256<<10))
			} else {
				_, err = io.Copy(down, up)
			}
			errc <- err
		}()
		c, err := net.Dial("unix", ul.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * waitFor)) // a relay that fails leaves c open
		buf := make([]byte, 64<<10)
		n := 0
		for {
			k, err := c.Read(buf)
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		for range 2 {
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		}
		if n != size {
			b.Fatalf("relayed %d bytes of %d", n, size)
		}
	}
}

// noFilter is a Set whose responses are not scanned.
type noFilter struct{ *Set }

func (n noFilter) Request(r *http.Request, t egress.Target) (func(*http.Response) error, error) {
	_, err := n.Set.Request(r, t)
	return nil, err
}

// BenchmarkResponseScan is the prefilter over a clean 256 KiB window of
// text with a line break every 64 bytes: checked in place ("raw") and, as
// before, copied without its breaks and checked ("stripped", the
// baseline of the ratio).
func BenchmarkResponseScan(b *testing.B) {
	set, err := New(Options{SandboxID: "sb1", Credentials: []Credential{{Name: "GH", Value: realA, Hosts: []string{"api.example:443"}, Header: "Authorization"}}})
	if err != nil {
		b.Fatal(err)
	}
	win := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog 0123456789 {}\":,.\n", 4096))
	rb := &redactBody{red: set.red, pf: set.pf}
	var base float64
	for _, raw := range []bool{false, true} {
		name := "stripped"
		if raw {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(win)))
			for b.Loop() {
				var hit bool
				if raw {
					hit = set.pf.hitRaw(win)
				} else {
					hit = set.pf.hit(rb.stripped(win))
				}
				if hit {
					b.Fatal("a clean window hit")
				}
			}
			ns := float64(b.Elapsed()) / float64(b.N)
			if !raw {
				base = ns
			} else if base > 0 {
				b.ReportMetric(base/ns, "x-stripped")
			}
		})
	}
}
