//go:build linux

package load

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocol is the MCP version the clients speak: what deployed clients
// speak today, with sessions (Mcp-Session-Id).
const protocol = "2025-11-25"

// callTimeout bounds one tool call; connectTimeout one session's start.
const (
	callTimeout    = 2 * time.Minute
	connectTimeout = 3 * time.Minute
	// idleEvery paces the idle calls.
	idleEvery = 10 * time.Millisecond
)

// Run performs the scenario o describes and returns its report. An error
// means the run could not be made (the gateway did not start, the audit
// could not be read); failed calls and leaks are in the report (see
// [Report.Problems]).
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	g, cleanup, err := openGateway(ctx, o)
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, g: g, start: time.Now(), expected: &ledger{n: map[recordKey]int{}}, sessions: map[string]bool{},
		cgroups: cgroupParent(g.pid)}
	r.transport = &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	rep := &Report{Scenario: o.Scenario, Server: o.Server, Scope: o.Scope, Clients: o.Clients,
		Sessions: o.Sessions, Calls: o.Calls, Concurrency: o.Concurrency, Rate: o.Rate}
	runErr := r.run(ctx, rep)
	r.transport.CloseIdleConnections()
	if runErr == nil {
		runErr = r.checkAudit(ctx, &rep.Audit)
	}
	if err := g.stop(); err != nil {
		rep.Stop = err.Error()
	}
	cleanup()
	rep.Samples = r.samples
	return rep, runErr
}

// openGateway starts a gateway on a config in a new temp dir, or returns
// the one o names. cleanup removes the temp dir (unless o.Keep).
func openGateway(ctx context.Context, o Options) (*gateway, func(), error) {
	if o.URL != "" {
		return &gateway{mcpbox: o.Mcpbox, url: o.URL, stateDir: o.StateDir, pid: o.PID, tokens: o.Tokens,
			roots: []string{o.StateDir}}, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "mcpbox-load-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		if o.Keep {
			o.Progress("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	}
	nm := ""
	if o.Server != ServerBuiltin {
		nm = o.NodeModules
	}
	in, err := writeConfig(dir, o.Clients, o.Scope, nm)
	if err == nil {
		var g *gateway
		if g, err = startGateway(ctx, o, in); err == nil {
			o.Progress("gateway pid %d on %s, config %s", g.pid, g.url, in.config)
			return g, cleanup, nil
		}
	}
	os.RemoveAll(dir)
	return nil, nil, err
}

// runner holds one run's state.
type runner struct {
	o         Options
	g         *gateway
	start     time.Time
	transport *http.Transport
	cgroups   string // the dir holding the sandboxes' cgroups

	expected *ledger // the calls sent, of every phase

	mu       sync.Mutex
	sessions map[string]bool // guarded by mu: this run's session ids
	samples  []Sample        // guarded by mu
	current  *recorder       // guarded by mu: the phase being sampled
}

func (r *runner) run(ctx context.Context, rep *Report) error {
	stop := r.sampleEvery(ctx, r.o.SampleEvery)
	defer stop()
	if r.o.IdleCalls > 0 && r.o.Scenario == ScenarioCalls {
		idle, err := r.idle(ctx)
		if err != nil {
			return err
		}
		rep.Idle = idle
	}
	switch r.o.Scenario {
	case ScenarioChurn:
		return r.churn(ctx, rep)
	default:
		rep.Load = r.calls(ctx)
		if rep.Idle != nil && rep.Idle.Latency.P99 > 0 {
			rep.P99Ratio = rep.Load.Latency.P99 / rep.Idle.Latency.P99
		}
		// With every session closed: what the gateway keeps (its
		// agent-scope sandboxes stay, by design, until serve stops).
		after := r.settle(ctx, math.MaxInt)
		rep.After = &after
		return nil
	}
}

// idle measures one session's sequential calls on an otherwise idle
// gateway: the baseline of the p99 ratio.
func (r *runner) idle(ctx context.Context) (*Phase, error) {
	r.o.Progress("idle: 1 session × %d sequential calls", r.o.IdleCalls)
	rec, end := r.phase("idle")
	sess, err := r.connect(ctx, 0, rec)
	if err != nil {
		return end(time.Time{}), nil
	}
	defer r.close(sess, rec)
	// Warm up: first calls fill caches and start lazy parts.
	for i := range 10 {
		r.call(ctx, sess, i, newRecorder("warm-up", r.expected), time.Time{})
	}
	// Spread over time (a call every 10 ms), the idle calls meet the
	// host's noise as the load's do.
	begin := time.Now()
	for i := range r.o.IdleCalls {
		time.Sleep(time.Until(begin.Add(time.Duration(i) * idleEvery)))
		r.call(ctx, sess, i, rec, time.Time{})
	}
	return end(begin), nil
}

// calls opens every session (all at once), then lets each make its calls
// with Concurrency in flight; the phase's time runs from the first call.
func (r *runner) calls(ctx context.Context) *Phase {
	o := r.o
	r.o.Progress("load: %d sessions over %d clients × %d calls, %d in flight per session, rate %v/s (0: unpaced)", o.Sessions, o.Clients, o.Calls, o.Concurrency, o.Rate)
	rec, end := r.phase("load")
	sessions := make([]*mcp.ClientSession, o.Sessions)
	var wg sync.WaitGroup
	for s := range o.Sessions {
		wg.Go(func() {
			sess, err := r.connect(ctx, s%o.Clients, rec)
			if err == nil {
				sessions[s] = sess
			}
		})
	}
	wg.Wait()
	r.o.Progress("load: %d sessions open", rec.phase.Sessions)
	// With a rate, every worker (session × concurrency) sends on its own
	// schedule, offset at random so that they do not send in step.
	var every time.Duration
	if o.Rate > 0 {
		every = time.Duration(float64(time.Second) * float64(rec.phase.Sessions*o.Concurrency) / o.Rate)
	}
	begin := time.Now()
	for _, sess := range sessions {
		if sess == nil {
			continue
		}
		wg.Go(func() {
			var cwg sync.WaitGroup
			for w := range o.Concurrency {
				cwg.Go(func() {
					var at time.Time
					if every > 0 {
						at = begin.Add(time.Duration(mrand.Int64N(int64(every))))
					}
					for i := w; i < o.Calls; i += o.Concurrency {
						if !at.IsZero() {
							time.Sleep(time.Until(at))
						}
						r.call(ctx, sess, i, rec, at)
						if !at.IsZero() {
							at = at.Add(every)
						}
					}
				})
			}
			cwg.Wait()
		})
	}
	wg.Wait()
	p := end(begin)
	for _, sess := range sessions {
		if sess != nil {
			wg.Go(func() { r.close(sess, rec) })
		}
	}
	wg.Wait()
	p.Errors, p.FirstErrors = rec.phase.Errors, rec.phase.FirstErrors // close errors too
	return p
}

// churn opens, uses and closes Sessions sessions, Concurrency at a time,
// and compares the gateway's resources before (after a warm-up) and
// after (once its sandboxes are gone and Settle has passed).
func (r *runner) churn(ctx context.Context, rep *Report) error {
	o := r.o
	// The warm-up fills what the gateway keeps on purpose, up to its
	// bounds (the 64 ended sandboxes `mcpbox ps` shows, the heap the
	// runtime settles on), so that "after" compares with a steady state.
	warm := newRecorder("warm-up", r.expected)
	r.churnSessions(ctx, min(100, o.Sessions), warm)
	before := r.settle(ctx, 0)
	rep.Before = &before
	r.o.Progress("churn: %d sessions (%d at once) × %d calls", o.Sessions, o.Concurrency, o.Calls)
	rec, end := r.phase("load")
	r.churnSessions(ctx, o.Sessions, rec)
	rep.Load = end(time.Time{})
	after := r.settle(ctx, before.Sandboxes)
	rep.After = &after
	// Warm-up failures count too.
	for k, n := range warm.phase.Errors {
		rep.Load.Errors["warm-up "+k] += n
	}
	return nil
}

func (r *runner) churnSessions(ctx context.Context, n int, rec *recorder) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range r.o.Concurrency {
		wg.Go(func() {
			for s := range next {
				sess, err := r.connect(ctx, s%r.o.Clients, rec)
				if err != nil {
					continue
				}
				for i := range r.o.Calls {
					r.call(ctx, sess, i, rec, time.Time{})
				}
				r.close(sess, rec)
			}
		})
	}
	for s := range n {
		next <- s
	}
	close(next)
	wg.Wait()
}

// settle waits (up to 2 minutes) until at most sandboxes sandboxes run,
// lets Settle pass with no client connection open, and samples.
func (r *runner) settle(ctx context.Context, sandboxes int) Sample {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s := r.sample(); s.Sandboxes <= sandboxes {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.transport.CloseIdleConnections()
	select {
	case <-time.After(r.o.Settle):
	case <-ctx.Done():
	}
	s := r.sample()
	r.o.Progress("settled: rss %.1f MiB, fds %d, goroutines %d, sandboxes %d, cgroups %d, mounts %d", mib(s.RSS), s.FDs, s.Goroutines, s.Sandboxes, s.Cgroups, s.Mounts)
	return s
}

// phase starts measuring a phase: its calls, the host's scheduling delay
// and the gateway's CPU time; end stops it and returns the phase, timed
// from since (zero: from the start).
func (r *runner) phase(name string) (rec *recorder, end func(since time.Time) *Phase) {
	rec = newRecorder(name, r.expected)
	r.mu.Lock()
	r.current = rec
	r.mu.Unlock()
	cpu := procCPU(r.g.pid)
	stop := make(chan struct{})
	jitter := make(chan []time.Duration)
	go func() {
		var ds []time.Duration
		for {
			select {
			case <-stop:
				jitter <- ds
				return
			default:
			}
			t := time.Now()
			time.Sleep(time.Millisecond)
			ds = append(ds, time.Since(t)-time.Millisecond)
		}
	}()
	return rec, func(since time.Time) *Phase {
		close(stop)
		p := rec.finish(since)
		p.Jitter = summarize(<-jitter)
		p.GatewayCPU = -1
		if now := procCPU(r.g.pid); cpu >= 0 && now >= 0 && p.Calls > 0 {
			p.GatewayCPU = (now - cpu) * 1000 / float64(p.Calls)
		}
		return p
	}
}

// connect opens a session as client i.
func (r *runner) connect(ctx context.Context, i int, rec *recorder) (*mcp.ClientSession, error) {
	var rt http.RoundTripper = r.transport
	if i < len(r.g.tokens) {
		rt = bearer{token: r.g.tokens[i], base: rt}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbox-load", Version: "1"}, nil)
	t := &mcp.StreamableClientTransport{Endpoint: r.g.url, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	begin := time.Now()
	sess, err := client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		rec.fail("connect", false, err)
		return nil, err
	}
	rec.connected(time.Since(begin))
	r.mu.Lock()
	r.sessions[sess.ID()] = true
	r.mu.Unlock()
	return sess, nil
}

func (r *runner) close(sess *mcp.ClientSession, rec *recorder) {
	if err := sess.Close(); err != nil && !errors.Is(err, context.Canceled) {
		rec.fail("close", false, err)
	}
}

// call makes the session's call number i (targets taken in turn) and
// checks its result. A call scheduled at a time already past is timed
// from then: a gateway that falls behind a fixed rate shows it in the
// latency (no coordinated omission).
func (r *runner) call(ctx context.Context, sess *mcp.ClientSession, i int, rec *recorder, at time.Time) {
	ts := r.o.targets()
	t := ts[i%len(ts)]
	var args map[string]any
	var want string
	switch t.server {
	case builtinName:
		f := i % inputFiles
		args, want = map[string]any{"path": fmt.Sprintf("input/f%02d.txt", f)}, fileContent(f)
	default:
		msg := fmt.Sprintf("%s-%d-%s", sess.ID(), i, randHex(4))
		args, want = map[string]any{"message": msg}, "Echo: "+msg
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	rec.sent(sess.ID(), t)
	begin := time.Now()
	if !at.IsZero() && at.Before(begin) {
		begin = at
	}
	res, err := sess.CallTool(cctx, &mcp.CallToolParams{Name: t.name(), Arguments: args})
	d := time.Since(begin)
	switch {
	case err != nil:
		rec.fail(errorKind(cctx, err), true, fmt.Errorf("%s: %w", t.name(), err))
	case res.IsError:
		rec.fail("tool_error", true, fmt.Errorf("%s: %s", t.name(), text(res)))
	case text(res) != want:
		rec.fail("wrong_result", true, fmt.Errorf("%s: got %q, want %q", t.name(), text(res), want))
	default:
		rec.ok(t.server, d)
	}
}

func text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// bearer adds a client's token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// sampleEvery records a sample every interval until stop is called.
func (r *runner) sampleEvery(ctx context.Context, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			s := r.sample()
			if n%10 == 0 {
				r.o.Progress("%5.0fs calls %d (p99 %.0f ms), rss %.1f MiB, fds %d, threads %d, goroutines %d, sandboxes %d, cgroups %d",
					s.Seconds, s.Calls, s.P99, mib(s.RSS), s.FDs, s.Threads, s.Goroutines, s.Sandboxes, s.Cgroups)
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// sample reads the gateway's resources now and keeps the sample.
func (r *runner) sample() Sample {
	s := Sample{Seconds: time.Since(r.start).Seconds(), RSS: -1, CPU: -1, FDs: -1, Threads: -1, Cgroups: -1,
		Mounts: -1, MountsAll: -1, Sandboxes: -1}
	if r.g.pid > 0 {
		s.RSS, s.Threads = procStatus(r.g.pid)
		s.FDs = countDir(fmt.Sprintf("/proc/%d/fd", r.g.pid))
		s.MountsAll, s.Mounts = mounts(r.g.pid, r.g.roots)
		s.CPU = procCPU(r.g.pid)
	}
	s.Goroutines = r.g.goroutines()
	sbs, err := r.g.sandboxes()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		s.Sandboxes = 0
		for _, sb := range sbs {
			if live(sb.State) && sb.Remote == "" {
				s.Sandboxes++
			}
		}
	}
	if r.cgroups != "" {
		s.Cgroups = ownCgroups(r.cgroups, r.g.pid, r.start)
	}
	s.SessionDirs = sessionDirs(r.g.stateDir)
	if r.current != nil {
		var l Latency
		s.Calls, l = r.current.progress()
		s.P99, s.Max = l.P99, l.Max
	}
	r.samples = append(r.samples, s)
	return s
}

// sessionDirs counts workspaces/AGENT/SERVER/sessions/ID dirs.
func sessionDirs(stateDir string) int {
	m, err := filepath.Glob(filepath.Join(stateDir, "workspaces", "*", "*", "sessions", "*"))
	if err != nil {
		return -1
	}
	return len(m)
}
