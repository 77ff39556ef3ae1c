package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's own tests: a programmable MCP server (testdata/mcpserver)
// behind `mcpbox run` and `mcpbox serve`, driven by the official Go SDK
// client. Every call has a deadline, so a gateway that loses a reply fails
// instead of hanging. Faults here; features, load and helpers in the
// other gateway_*_test.go files.

// TestGatewayFaults: a misbehaving upstream under `mcpbox run` costs at
// most the call in flight, never the client's session.
func TestGatewayFaults(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, v := range gwVersions {
			t.Run(v, func(t *testing.T) { gwFaults(t, m, v) })
		}
	})
}

func gwFaults(t *testing.T, m mode, version string) {
	t.Run("crash", func(t *testing.T) {
		sess := gwRun(t, m, nil, version)
		before := gwMustCall(t, sess, "instance", nil, "")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Calls in flight when the server dies fail too, instead of hanging.
		const pending = 3
		pendingErrs := make(chan error, pending)
		for range pending {
			go func() {
				_, err := gwCall(ctx, sess, "slow", map[string]any{"ms": 200, "steps": 100})
				pendingErrs <- err
			}()
		}
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		got, err := gwCall(ctx, sess, "crash", nil)
		elapsed := time.Since(start)
		switch {
		case ctx.Err() != nil:
			t.Fatalf("crash call still pending after %v", elapsed)
		case err == nil:
			t.Fatalf("crash returned %q, want an error", got)
		case elapsed > 10*time.Second:
			t.Errorf("crash took %v to fail, want < 10 s", elapsed)
		}
		t.Logf("crash failed after %v: %v", elapsed, err)
		for range pending {
			if err := <-pendingErrs; err == nil {
				t.Error("a 20 s call in flight during the crash succeeded")
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the calls in flight during the crash took %v to fail", d)
		}
		// Restart on failure: a later call reaches a new server process.
		var after string
		for {
			after, err = gwCall(ctx, sess, "instance", nil)
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("no call succeeded within 30 s of the crash; last error: %v", err)
		}
		if after == before {
			t.Fatalf("instance %s answered before and after the crash: the call did not reach a restarted server", after)
		}
		t.Logf("restarted after %v", time.Since(start))
		gwMustCall(t, sess, "echo", map[string]any{"text": "after crash"}, "after crash")
	})
	t.Run("garbage", func(t *testing.T) {
		sess := gwRun(t, m, nil, version)
		before := gwMustCall(t, sess, "instance", nil, "")
		gwMustCall(t, sess, "garbage", nil, "garbage written")
		for i := range 3 {
			text := fmt.Sprintf("after garbage %d", i)
			gwMustCall(t, sess, "echo", map[string]any{"text": text}, text)
		}
		gwMustCall(t, sess, "instance", nil, before) // skipped, not restarted
	})
	t.Run("stderr", func(t *testing.T) {
		sess, logs := gwRunLogs(t, m, nil, version)
		text := "to stderr " + gwHex(6)
		gwMustCall(t, sess, "stderr", map[string]any{"text": text}, "ok")
		if !logs.waitFor(text, 10*time.Second) {
			t.Fatalf("the server's stderr line %q is not in mcpbox's stderr within 10 s:\n%s", text, logs)
		}
		gwMustCall(t, sess, "echo", map[string]any{"text": "after stderr"}, "after stderr")
	})
	t.Run("huge", func(t *testing.T) {
		var mu sync.Mutex
		var biggest int // largest log notification the client saw
		opts := &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			s, _ := r.Params.Data.(string)
			mu.Lock()
			biggest = max(biggest, len(s))
			mu.Unlock()
		}}
		sess := gwRun(t, m, opts, version)
		before := gwMustCall(t, sess, "instance", nil, "")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		start := time.Now()
		got, err := gwCall(ctx, sess, "huge", map[string]any{"mib": 50})
		if err != nil || got != "wrote 50 MiB" {
			t.Fatalf("huge 50 after %v: %q, %v; want the result after the dropped line", time.Since(start), got, err)
		}
		t.Logf("huge 50 took %v", time.Since(start))
		gwMustCall(t, sess, "echo", map[string]any{"text": "after huge"}, "after huge")
		gwMustCall(t, sess, "instance", nil, before)
		mu.Lock()
		defer mu.Unlock()
		if biggest > 1<<20 {
			t.Fatalf("the client received a %d-byte log message", biggest)
		}
	})
}

// TestGatewayLimits: --call-timeout ends a call that runs too long,
// --output-limit refuses a result too large, and either leaves the session
// usable.
func TestGatewayLimits(t *testing.T) {
	m := modes(t)[0]
	for _, v := range gwVersions {
		t.Run(v, func(t *testing.T) {
			sess := gwRun(t, m, nil, v, "--call-timeout", "1s", "--output-limit", "1Mi")
			t.Run("call-timeout", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				start := time.Now()
				got, err := gwCall(ctx, sess, "slow", map[string]any{"ms": 500, "steps": 20})
				elapsed := time.Since(start)
				if err == nil {
					t.Fatalf("a 10 s call under --call-timeout 1s returned %q after %v", got, elapsed)
				}
				if elapsed < time.Second || elapsed > 5*time.Second {
					t.Errorf("the call failed after %v, want about 1 s: %v", elapsed, err)
				}
				t.Logf("timed out after %v: %v", elapsed, err)
				gwMustCall(t, sess, "echo", map[string]any{"text": "after timeout"}, "after timeout")
			})
			t.Run("output-limit", func(t *testing.T) {
				if got := gwMustCall(t, sess, "blob", map[string]any{"bytes": 512 << 10}, ""); len(got) != 512<<10 {
					t.Fatalf("a 512 KiB blob under --output-limit 1Mi came back with %d bytes", len(got))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				got, err := gwCall(ctx, sess, "blob", map[string]any{"bytes": 2 << 20})
				if err == nil {
					t.Fatalf("a 2 MiB blob under --output-limit 1Mi came back with %d bytes", len(got))
				}
				if !strings.Contains(err.Error(), "output limit") {
					t.Errorf("the 2 MiB blob failed with %v, want it to name the output limit", err)
				}
				gwMustCall(t, sess, "echo", map[string]any{"text": "after limit"}, "after limit")
			})
		})
	}
}

// TestGatewayDisconnect: a client that goes away mid-call, politely or
// not, leaves the gateway serving others.
func TestGatewayDisconnect(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g := gwServe(t, m, gwConfig(t, m, "solo"))
		for _, v := range gwVersions {
			t.Run(v, func(t *testing.T) { gwDisconnect(t, g, v) })
		}
	})
}

func gwDisconnect(t *testing.T, g *gwGateway, version string) {
	slow := map[string]any{"ms": 100, "steps": 40}
	// healthy checks that a new session works and, with cancelled, that
	// the call its client cancelled ended upstream too. (A dropped
	// connection is not a cancellation in Streamable HTTP: the client may
	// come back for the result.)
	healthy := func(t *testing.T, cancelled bool) {
		t.Helper()
		if !g.alive() {
			t.Fatalf("mcpbox serve exited: %v", g.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, version)
		for deadline := time.Now().Add(3 * time.Second); cancelled; time.Sleep(100 * time.Millisecond) {
			n := gwMustCall(t, sess, "inflight", nil, "")
			if n == "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("3 s after its client went away, the upstream still runs %s slow calls", n)
				break
			}
		}
		text := "healthy " + gwHex(4)
		gwMustCall(t, sess, "echo", map[string]any{"text": text}, text)
		gwMustCall(t, sess, "slow", map[string]any{"ms": 10, "steps": 2}, "slept 2 steps")
	}
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, version)
		cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer ccancel()
		start := time.Now()
		if _, err := gwCall(cctx, sess, "slow", slow); err == nil {
			t.Fatal("a cancelled 10 s call succeeded")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the cancelled call returned after %v", d)
		}
		gwMustCall(t, sess, "echo", map[string]any{"text": "same session"}, "same session")
		healthy(t, true)
	})
	t.Run("close", func(t *testing.T) {
		// The SDK's Close is graceful: it waits for the call in flight,
		// which may end either way; neither may take the gateway down.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess, err := gwConnectErr(ctx, g.url, gwHTTP, nil, version)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { _, err := gwCall(ctx, sess, "slow", slow); errc <- err }()
		time.Sleep(500 * time.Millisecond)
		gwClose(t, sess)
		select {
		case err := <-errc:
			t.Logf("the call of the closed session returned %v", err)
		case <-time.After(15 * time.Second):
			t.Fatal("the call of a closed session did not return within 15 s")
		}
		healthy(t, false)
	})
	t.Run("drop", func(t *testing.T) {
		// Abruptly close the TCP connections mid-call: no DELETE, no cancel.
		var mu sync.Mutex
		var conns []net.Conn // guarded by mu
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
			return c, err
		}}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess, err := gwConnectErr(ctx, g.url, &http.Client{Transport: tr}, nil, version)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			start := time.Now()
			gwClose(t, sess)
			t.Logf("closing the dropped session took %v", time.Since(start))
		}()
		errc := make(chan error, 1)
		go func() { _, err := gwCall(ctx, sess, "slow", slow); errc <- err }()
		time.Sleep(500 * time.Millisecond)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		start := time.Now()
		select {
		case err := <-errc:
			t.Logf("the dropped call returned after %v: %v", time.Since(start), err)
		case <-time.After(20 * time.Second):
			t.Fatal("the call on dropped connections did not return within 20 s")
		}
		healthy(t, false)
	})
}
