package credinject

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

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
// in CPU time).
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
			if cw := connWall[false]; cw != 0 {
				b.ReportMetric(cw/(cw+wall), "bound")
				b.ReportMetric(connCPU[false]/(connCPU[false]+cpu), "cpu-bound")
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
