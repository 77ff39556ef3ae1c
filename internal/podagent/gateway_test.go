//go:build linux

package podagent

import (
	"cmp"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/gateway"
)

// TestGatewayThroughAgent puts the gateway in front of a pod as the
// Kubernetes backend will: Launch starts the pod's server with Connect and
// hands the gateway the connection. A client of either protocol era calls
// the server's tools through both.
func TestGatewayThroughAgent(t *testing.T) {
	for _, version := range []string{"", "2026-07-28"} {
		t.Run("client "+version, func(t *testing.T) {
			ca, err := NewCA()
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var pods []*pod
			srv := &gateway.Server{Name: "kube", Prefix: "k_", Scope: gateway.ScopeAgent, Allow: []string{"*"},
				Launch: func(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
					p := startPod(t, "pod-gw", podOpts{ca: ca})
					mu.Lock()
					pods = append(pods, p)
					mu.Unlock()
					c, err := Connect(ctx, p.addr, p.name, ca, StartRequest{Env: map[string]string{"TOKEN": "t0k3n-for-" + scope.Agent}})
					if err != nil {
						return nil, err
					}
					return &gateway.Process{Conn: c, Stop: func() { p.cmd.Process.Kill() }}, nil
				}}
			g, err := gateway.New([]*gateway.Server{srv}, gateway.Options{CallTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			cr, gw := io.Pipe()
			gr, cw := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- g.ServeStdio(ctx, "alice", gr, gw) }()
			cs := session(t, &mcp.IOTransport{Reader: cr, Writer: cw}, nil, version)
			if got, err := callText(t, cs, "k_whoami", nil); err != nil || got != "pod-gw" {
				t.Fatalf("k_whoami through the gateway and the agent = %q, %v", got, err)
			}
			if got, err := callText(t, cs, "k_getenv", map[string]any{"text": "TOKEN"}); err != nil || got != "t0k3n-for-alice" {
				t.Errorf("k_getenv TOKEN = %q, %v", got, err)
			}
			cs.Close()
			cancel()
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatal("the gateway session did not end")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(pods) != 1 {
				t.Errorf("the gateway launched %d pods for one agent", len(pods))
			}
		})
	}
}

// TestPodOutlivesItsCertificate: a pod's certificate is checked at the
// handshake of the gateway's one connection to it; a pod that runs past
// the certificate's end (DefaultPodTTL, a day) keeps serving, many calls
// at once included (the transport never dials a second connection, which
// the expired certificate would fail).
func TestPodOutlivesItsCertificate(t *testing.T) {
	const ttl = 2 * time.Second
	expires := time.Now().Add(ttl)
	p := startPod(t, "pod-expiring", podOpts{ttl: ttl})
	cs := session(t, connect(t, p, StartRequest{}), nil, "")
	time.Sleep(time.Until(expires.Add(1100 * time.Millisecond)))
	const n = 300
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := callText(t, cs, "slow", map[string]any{"ms": 1500})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d calls after the pod's certificate expired failed; the first: %v", failed, n, first)
	}
}
