package podagent

import (
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
