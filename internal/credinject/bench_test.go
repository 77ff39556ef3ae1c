package credinject

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"mcpbox/internal/egress"
)

// BenchmarkDownload moves a 256 MiB response through the proxy: over a
// plain CONNECT tunnel ("connect") and through the intercepting path
// ("intercept": TLS terminated, the response scanned for the value and
// TLS again). The target is intercept >= 0.8x connect.
func BenchmarkDownload(b *testing.B) {
	const size = 256 << 20
	chunk := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog 0123456789 {}\":,.\n", 1024))
	serve := func(w http.ResponseWriter, r *http.Request) {
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
	for _, tc := range []struct {
		name string
		u    *upstream
		c    *http.Client
	}{
		{"connect", plain, r.client(b, pool(plain), false)},
		{"intercept", cred, r.client(b, nil, false)},
		{"intercept-noscan", cred, noscan.client(b, nil, false)},
	} {
		tc.c.Timeout = 0
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(size)
			cpu0 := cpuTime()
			for b.Loop() {
				req := newReq(b, "GET", "https://"+tc.u.hostPort()+"/big", nil)
				req.Header.Set("Authorization", "Bearer "+ph)
				resp, err := tc.c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatalf("got %d bytes, %v", n, err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// noFilter is a Set whose responses are not scanned.
type noFilter struct{ *Set }

func (n noFilter) Request(r *http.Request, t egress.Target) (func(*http.Response) error, error) {
	_, err := n.Set.Request(r, t)
	return nil, err
}
