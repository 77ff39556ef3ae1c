package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGatewayConcurrentSessions: 50 sessions × 200 echo calls with unique
// payloads over HTTP, four in flight per session, through one upstream;
// every reply matches its request.
func TestGatewayConcurrentSessions(t *testing.T) {
	const sessions, calls, inflight = 50, 200, 4
	m := modes(t)[0]
	g := gwServe(t, m, gwConfig(t, m, "solo"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		ok       int
		failures []string // guarded by mu, with ok
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			sess, err := gwConnectErr(ctx, g.url, gwHTTP, nil, gwLegacy)
			if err != nil {
				fail("session %d: connecting: %v", s, err)
				return
			}
			defer gwClose(t, sess)
			var cwg sync.WaitGroup
			for w := range inflight {
				cwg.Go(func() {
					for i := w; i < calls; i += inflight {
						want := fmt.Sprintf("s%02d-c%03d-%s", s, i, gwHex(6))
						got, err := gwCall(ctx, sess, "echo", map[string]any{"text": want})
						switch {
						case err != nil:
							fail("session %d call %d: %v", s, i, err)
						case got != want:
							fail("session %d call %d: got %q, want %q", s, i, got, want)
						default:
							mu.Lock()
							ok++
							mu.Unlock()
						}
					}
				})
			}
			cwg.Wait()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d sessions × %d calls: %d ok in %v (%.0f calls/s)", sessions, calls, ok, elapsed, float64(ok)/elapsed.Seconds())
	if len(failures) > 0 {
		t.Errorf("%d of %d calls failed or were misrouted; first ones:\n%s",
			len(failures), sessions*calls, strings.Join(failures[:min(len(failures), 10)], "\n"))
	}
	if ok != sessions*calls {
		t.Errorf("%d calls matched, want %d", ok, sessions*calls)
	}
	if elapsed > 60*time.Second {
		t.Errorf("took %v, want < 60 s", elapsed)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the 5 min bound ran out")
	}
}

// TestGatewayConcurrentCalls: one `mcpbox run` session, 16 calls in
// flight, echo mixed with sampling round trips; every reply matches its
// request.
// The same against the test server directly is the baseline.
func TestGatewayConcurrentCalls(t *testing.T) {
	paths := []struct {
		name    string
		connect func(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession
	}{
		{"direct", func(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession {
			return gwDirect(t, ctx, filepath.Join(goBuild(t, gwServerPkg), "mcpserver"), opts, gwLegacy)
		}},
		{"run", func(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession {
			return gwRun(t, modes(t)[0], opts, gwLegacy)
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			gwConcurrentCalls(t, ctx, p.connect(t, ctx, newGWRecorder().options()))
		})
	}
}

func gwConcurrentCalls(t *testing.T, ctx context.Context, sess *mcp.ClientSession) {
	const workers, calls = 16, 100
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string // guarded by mu
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				text := fmt.Sprintf("w%02d-c%03d-%s", w, i, gwHex(6))
				tool, args, want := "echo", map[string]any{"text": text}, text
				if i%10 == 0 {
					tool, args, want = "sample", map[string]any{"prompt": text}, "sampled: "+text
				}
				got, err := gwCall(ctx, sess, tool, args)
				if err != nil || got != want {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %s: %q, %v", tool, text, got, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls in %v", workers*calls, time.Since(start))
	if len(failures) > 0 {
		t.Errorf("%d of %d calls failed or were misrouted; first ones:\n%s",
			len(failures), workers*calls, strings.Join(failures[:min(len(failures), 10)], "\n"))
	}
}

// TestGatewaySamplingRouting: no client ever sees another's sampling
// prompt. With a sandbox per session the request reaches the client whose
// call caused it; on a server shared by sessions with calls in flight, a
// stdio server's request does not say whose it is, and the gateway
// refuses it rather than guess.
func TestGatewaySamplingRouting(t *testing.T) {
	m := modes(t)[0]
	tokA, tokB := gwHex(16), gwHex(16)
	cases := []struct {
		name   string
		opts   gwConfigOpts
		env    []string
		tokens [2]string
		shared bool // one server instance for both sessions
	}{
		{"sandbox per session", gwConfigOpts{servers: []string{"solo"}, scope: "session"}, nil, [2]string{}, false},
		{"one agent", gwConfigOpts{servers: []string{"solo"}}, nil, [2]string{}, true},
		{"shared by two agents", gwConfigOpts{
			servers: []string{"solo"}, scope: "shared",
			clients: map[string]string{"alice": "TOKEN_ALICE", "bob": "TOKEN_BOB"},
		}, []string{"TOKEN_ALICE=" + tokA, "TOKEN_BOB=" + tokB}, [2]string{tokA, tokB}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := gwServe(t, m, gwConfigWith(t, m, c.opts), c.env...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a := gwSampler(t, ctx, g.url, "A", c.tokens[0])
			b := gwSampler(t, ctx, g.url, "B", c.tokens[1])
			prompt := "secret of A " + gwHex(4)
			type reply struct {
				text string
				err  error
			}
			ra, rb := make(chan reply, 1), make(chan reply, 1)
			go func() {
				text, err := gwCall(ctx, a.sess, "sample", map[string]any{"prompt": prompt, "delay_ms": 700})
				ra <- reply{text, err}
			}()
			time.Sleep(200 * time.Millisecond)
			go func() {
				text, err := gwCall(ctx, b.sess, "slow", map[string]any{"ms": 100, "steps": 20})
				rb <- reply{text, err}
			}()
			r := <-ra
			refused := c.shared && r.err != nil && strings.Contains(r.err.Error(), "cannot tell whose this request is")
			if !refused && (r.err != nil || r.text != "sampled by A: "+prompt) {
				t.Errorf("A's sample: %q, %v; want %q", r.text, r.err, "sampled by A: "+prompt)
			}
			if r := <-rb; r.err != nil {
				t.Errorf("B's slow call: %v", r.err)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if len(b.seen) > 0 {
				t.Errorf("client B was asked to sample %q", b.seen)
			}
		})
	}
}

// gwSamplerClient is a session whose sampling handler signs its answers
// with the client's name and records the prompts it was shown.
type gwSamplerClient struct {
	sess *mcp.ClientSession
	mu   sync.Mutex
	seen []string // guarded by mu
}

func gwSampler(t *testing.T, ctx context.Context, url, name, token string) *gwSamplerClient {
	c := &gwSamplerClient{}
	opts := &mcp.ClientOptions{CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		var text string
		if len(req.Params.Messages) > 0 {
			if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		c.mu.Lock()
		c.seen = append(c.seen, text)
		c.mu.Unlock()
		return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled by " + name + ": " + text}}, nil
	}}
	hc := gwHTTP
	if token != "" {
		hc = &http.Client{Transport: gwBearer{token: token, base: gwHTTP.Transport}}
	}
	c.sess = gwConnect(t, ctx, url, hc, opts, gwLegacy)
	return c
}

// gwBearer adds a bearer token to every request.
type gwBearer struct {
	token string
	base  http.RoundTripper
}

func (b gwBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestGatewayAggregation: two servers behind one serve, as a client on the
// 2025-11-25 protocol and on the 2026-07-28 one sees them: prefixed tools
// and prompts routed to the right upstream, server-to-client requests
// (sampling, elicitation) answered to the upstream that asked, progress and
// list_changed notifications passed on.
func TestGatewayAggregation(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		// Tools added at runtime are what pinning holds back until
		// trusted (integrity_test.go); here they must pass as they are.
		g := gwServe(t, m, gwConfigWith(t, m, gwConfigOpts{servers: []string{"a", "b"}, pin: "off"}))
		for i, version := range gwVersions {
			t.Run(version, func(t *testing.T) {
				rec := newGWRecorder()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				sess := gwConnect(t, ctx, g.url, nil, rec.options(), version)
				gwFeatures(t, sess, rec, gwTarget{servers: []string{"a", "b"}, prefixed: true}, version, fmt.Sprintf("fresh%d", i))
			})
		}
	})
}
