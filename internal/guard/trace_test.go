package guard

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/gateway"
	"mcpbox/internal/telemetry"
	"mcpbox/internal/track"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes
// each export request (protobuf) and keeps its spans and attributes.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	resAttrs []*commonpb.KeyValue
	bad      []string // requests it could not decode
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(io.LimitReader(body, 16<<20))
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &msg)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			r.bad = append(r.bad, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type")+" "+fmtErr(err))
			http.Error(w, "bad export", 400)
			return
		}
		for _, rs := range msg.ResourceSpans {
			r.resAttrs = append(r.resAttrs, rs.GetResource().GetAttributes()...)
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// withTracer rebuilds the rig's pipeline with the tracer of the OTEL_*
// environment, as serve does (Options.Tracer), before any call.
func withTracer(t *testing.T, r *guardRig, p *telemetry.Provider) {
	t.Helper()
	if p == nil {
		t.Fatal("the environment names an endpoint, but no provider")
	}
	r.g.tracer = p.Tracer()
	r.g.handle = r.g.pipeline()
}

const traceTestConfig = `version: 1
approvals: {timeout: 10s}
servers:
  echo:
    command: [echo-server]
    tools:
      rules:
        - {tool: echo, when: 'args.text.startsWith("forbidden")', action: deny}
        - {tool: echo, when: 'args.text.startsWith("review")', action: approve}
      allow: [echo]
`

// TestCallSpans: with OTEL_EXPORTER_OTLP_ENDPOINT naming a loopback
// OTLP/HTTP receiver, a call through the guard and gateway is exported as
// a span tree: the call's span, child of the client's traceparent, with
// the sandbox start, policy, approval wait and upstream call as its
// children; the trace id is in the audit record only when the client sent
// none; no argument value appears in any span.
func TestCallSpans(t *testing.T) {
	recv := newOTLPReceiver(t)
	t.Setenv(telemetry.EnvEndpoint, recv.srv.URL)
	t.Setenv(telemetry.EnvExporter, "")
	t.Setenv("OTEL_SERVICE_NAME", "mcpbox-under-test")
	p, err := telemetry.FromEnv(context.Background(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The server's first call starts a "sandbox" (a track the guard
	// registers, as the local launcher's observer does) while the call is
	// upstream: as when a sandbox stopped for idleness starts again for a
	// call (the first start is for the tool list, before any call).
	var g *Guard
	var once sync.Once
	launch := func(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
		return echoServer(func() {
			once.Do(func() {
				sb := track.NewSandbox()
				time.Sleep(30 * time.Millisecond)
				g.SandboxStarted("echo", scope, sb)
			})
		})
	}
	r := newGuardRigServer(t, traceTestConfig, nil, &gateway.Server{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: launch})
	g = r.g
	withTracer(t, r, p)

	const secret = "S3CR3T-argument-value"
	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if pend := r.g.broker.Pending(); len(pend) == 1 {
				time.Sleep(20 * time.Millisecond) // a measurable wait
				r.g.broker.Decide(pend[0].ID, approval.Decision{Allow: true, By: "cli:uid=0"})
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "review " + secret}}
	params.SetMeta(map[string]any{"traceparent": "00-" + clientTrace + "-" + clientSpan + "-01"})
	if res, err := r.sess.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("traced call: %v %+v", err, res)
	}
	if _, isErr := r.call(t, "plain "+secret); isErr {
		t.Fatal("untraced call failed")
	}
	if _, isErr := r.call(t, "forbidden "+secret); !isErr {
		t.Fatal("denied call went through")
	}
	recs := r.records(t)
	if err := p.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}
	// The approval record keeps the wait, the sandbox start record the
	// start latency (the metrics' histograms read them).
	for event, least := range map[string]time.Duration{audit.EventApproval: 20 * time.Millisecond, audit.EventSandboxStart: 30 * time.Millisecond} {
		got, err := r.g.store.Query(ctx, audit.Filter{Event: event})
		if err != nil || len(got) != 1 || got[0].Duration < least || got[0].Duration > 10*time.Second {
			t.Errorf("%s records: %+v %v; want one lasting at least %v", event, got, err, least)
		}
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.bad) > 0 {
		t.Fatalf("undecodable exports: %q", recv.bad)
	}
	if len(recs) != 3 {
		t.Fatalf("%d call records", len(recs))
	}

	roots := map[string]*tracepb.Span{} // by trace id
	children := map[string][]string{}   // parent span id -> child names
	for _, s := range recv.spans {
		if strings.HasPrefix(s.Name, SpanCall+" ") {
			roots[hex.EncodeToString(s.TraceId)] = s
		} else {
			children[hex.EncodeToString(s.ParentSpanId)] = append(children[hex.EncodeToString(s.ParentSpanId)], s.Name)
		}
		where := "span " + s.Name
		checkNoSecret(t, where, s.Name, s.Attributes, secret)
		for _, e := range s.Events {
			checkNoSecret(t, where+" event", e.Name, e.Attributes, secret)
		}
		if strings.Contains(s.GetStatus().GetMessage(), secret) {
			t.Errorf("%s: status carries the argument", where)
		}
	}
	checkNoSecret(t, "resource", "", recv.resAttrs, secret)
	if attr(recv.resAttrs, "service.name") != "mcpbox-under-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", attr(recv.resAttrs, "service.name"))
	}
	if len(roots) != 3 {
		t.Fatalf("%d call spans (want 3, one trace each): %v", len(roots), spanNames(recv.spans))
	}

	// 1: the client's trace: the call span is its span's child.
	root := roots[clientTrace]
	if root == nil {
		t.Fatalf("no call span in the client's trace %s: %v", clientTrace, spanNames(recv.spans))
	}
	if got := hex.EncodeToString(root.ParentSpanId); got != clientSpan {
		t.Errorf("call span's parent %s, want the client's %s", got, clientSpan)
	}
	if root.Kind != tracepb.Span_SPAN_KIND_SERVER || attr(root.Attributes, AttrServer) != "echo" || attr(root.Attributes, AttrTool) != "echo" ||
		attr(root.Attributes, AttrClient) != gateway.LocalAgent || attr(root.Attributes, AttrDecision) != "approved" || attr(root.Attributes, AttrOutcome) != audit.OutcomeOK {
		t.Errorf("call span: kind %v attributes %v", root.Kind, root.Attributes)
	}
	got := strings.Join(sortedCopy(children[hex.EncodeToString(root.SpanId)]), ",")
	if want := strings.Join(sortedCopy([]string{SpanPolicy, SpanApproval, SpanUpstream}), ","); got != want {
		t.Errorf("children of the approved call: %s, want %s", got, want)
	}
	var up *tracepb.Span
	for _, s := range recv.spans {
		if s.Name == SpanUpstream && hex.EncodeToString(s.TraceId) == clientTrace {
			up = s
		}
		if s.Name == SpanApproval && hex.EncodeToString(s.TraceId) == clientTrace && s.EndTimeUnixNano-s.StartTimeUnixNano < uint64(20*time.Millisecond) {
			t.Errorf("the approval span lasted %v, less than the wait", time.Duration(s.EndTimeUnixNano-s.StartTimeUnixNano))
		}
	}
	if up == nil || strings.Join(children[hex.EncodeToString(up.SpanId)], ",") != SpanSandbox {
		t.Errorf("the upstream call that launched the server: children %v, want %s", children[hex.EncodeToString(up.GetSpanId())], SpanSandbox)
	}
	if _, ok := recs[0].Detail[audit.DetailTraceID]; ok {
		t.Errorf("the client's trace id is in its traceparent, yet the record has %s", audit.DetailTraceID)
	}

	// 2 and 3: no traceparent: a new trace, whose id the record keeps.
	for i, want := range []struct{ decision, kids string }{
		{"allow", strings.Join(sortedCopy([]string{SpanPolicy, SpanUpstream}), ",")}, // the server runs already
		{"deny", SpanPolicy}, // refused: never forwarded
	} {
		rec := recs[i+1]
		id := rec.Detail[audit.DetailTraceID]
		s := roots[id]
		if s == nil {
			t.Fatalf("record %d: trace id %q names no exported call span", i+1, id)
		}
		if len(s.ParentSpanId) != 0 || attr(s.Attributes, AttrDecision) != want.decision || attr(s.Attributes, AttrOutcome) != rec.Outcome {
			t.Errorf("call %d span: parent %x attributes %v (record %s/%s)", i+1, s.ParentSpanId, s.Attributes, rec.Decision, rec.Outcome)
		}
		if got := strings.Join(sortedCopy(children[hex.EncodeToString(s.SpanId)]), ","); got != want.kids {
			t.Errorf("call %d children %s, want %s", i+1, got, want.kids)
		}
	}
}

// echoServer is echoLauncher's server, running onCall first in each call.
func echoServer(onCall func()) (*gateway.Process, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "returns text", Annotations: harmless()},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			onCall()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Run(ctx, &mcp.IOTransport{Reader: inR, Writer: outW})
		outW.Close()
		close(done)
	}()
	return &gateway.Process{Stdin: inW, Stdout: outR, Stop: func() {
		cancel()
		inW.Close()
		outR.Close()
		<-done
	}}, nil
}

func checkNoSecret(t *testing.T, where, name string, kvs []*commonpb.KeyValue, secret string) {
	t.Helper()
	if strings.Contains(name, secret) {
		t.Errorf("%s: the name carries an argument value", where)
	}
	for _, kv := range kvs {
		if strings.Contains(kv.Key, secret) || strings.Contains(kv.GetValue().String(), secret) {
			t.Errorf("%s: attribute %s carries an argument value", where, kv.Key)
		}
	}
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TestWakeSpan: a call to a server whose sandbox is paused has the thaw
// (from the call going upstream until the launcher reported the resume)
// as a child of its upstream span; a call to a running one has none.
func TestWakeSpan(t *testing.T) {
	recv := newOTLPReceiver(t)
	t.Setenv(telemetry.EnvEndpoint, recv.srv.URL)
	t.Setenv(telemetry.EnvExporter, "")
	p, err := telemetry.FromEnv(context.Background(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The "launcher": a track per start (registered at the first call: the
	// start for the tool list comes before the rig has its guard), paused
	// and resumed as the local launcher does (state, then the observer's
	// event).
	var g *Guard
	var scope gateway.Scope
	launch := func(ctx context.Context, sc gateway.Scope) (*gateway.Process, error) {
		sb := track.NewSandbox()
		scope = sc
		var once sync.Once
		proc, err := echoServer(func() { once.Do(func() { g.SandboxStarted("echo", sc, sb) }) })
		if err != nil {
			return nil, err
		}
		proc.Pause = func() error {
			sb.SetState(gateway.StatePaused)
			g.SandboxEvent(audit.EventSandboxPause, "echo", sc, sb, "")
			return nil
		}
		proc.Resume = func() error {
			time.Sleep(25 * time.Millisecond) // a thaw that takes a while
			sb.SetState(gateway.StateRunning)
			g.SandboxEvent(audit.EventSandboxResume, "echo", sc, sb, "")
			return nil
		}
		return proc, nil
	}
	r := newGuardRigServer(t, traceTestConfig, nil, &gateway.Server{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: launch})
	g = r.g
	withTracer(t, r, p)
	r.call(t, "running")
	if err := r.g.gw.Load().Pause("echo", scope); err != nil {
		t.Fatal(err)
	}
	r.call(t, "woken")
	r.call(t, "running again")
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	ups := map[string]int{} // upstream span id -> its call's index
	var calls []*tracepb.Span
	for _, s := range recv.spans {
		if strings.HasPrefix(s.Name, SpanCall+" ") {
			calls = append(calls, s)
		}
	}
	slices.SortFunc(calls, func(a, b *tracepb.Span) int { return int(int64(a.StartTimeUnixNano) - int64(b.StartTimeUnixNano)) })
	if len(calls) != 3 {
		t.Fatalf("%d call spans, want 3", len(calls))
	}
	for i, c := range calls {
		for _, s := range recv.spans {
			if s.Name == SpanUpstream && slices.Equal(s.ParentSpanId, c.SpanId) {
				ups[hex.EncodeToString(s.SpanId)] = i
			}
		}
	}
	wakes := map[int]time.Duration{}
	for _, s := range recv.spans {
		if s.Name == SpanWake {
			i, ok := ups[hex.EncodeToString(s.ParentSpanId)]
			if !ok {
				t.Errorf("a wake span outside any upstream span")
			}
			wakes[i] = time.Duration(s.EndTimeUnixNano - s.StartTimeUnixNano)
		}
	}
	if len(wakes) != 1 || wakes[1] < 25*time.Millisecond {
		t.Errorf("wake spans by call: %v; want one, of the second call, lasting the thaw (25 ms or more)", wakes)
	}
}
