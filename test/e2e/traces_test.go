package e2e

import (
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
	dto "github.com/prometheus/client_model/go"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// trReceiver is an OTLP/HTTP trace receiver on loopback that decodes
// the export requests (protobuf) it is sent.
type trReceiver struct {
	url   string
	mu    sync.Mutex
	spans []*tracepb.Span
	res   []*commonpb.KeyValue
	bad   []string
}

func newTrReceiver(t *testing.T) *trReceiver {
	t.Helper()
	r := &trReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &msg)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			r.bad = append(r.bad, req.URL.Path+" "+req.Header.Get("Content-Type"))
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		for _, rs := range msg.ResourceSpans {
			r.res = append(r.res, rs.GetResource().GetAttributes()...)
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func trAttr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// trHist is the histogram of name for server box (and decision, if not "").
func trHist(fams map[string]*dto.MetricFamily, name, decision string) *dto.Histogram {
	for _, mt := range fams[name].GetMetric() {
		labels := map[string]string{}
		for _, lp := range mt.Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["server"] == auServer && (decision == "" || labels["decision"] == decision) {
			return mt.GetHistogram()
		}
	}
	return nil
}

// trCall calls tool with args and, if traceparent is not "", that
// traceparent in _meta, in the background.
func trCall(sess *mcp.ClientSession, tool string, args map[string]any, traceparent string) <-chan auCall {
	ch := make(chan auCall, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		p := &mcp.CallToolParams{Name: tool, Arguments: args}
		if traceparent != "" {
			p.SetMeta(map[string]any{"traceparent": traceparent})
		}
		start := time.Now()
		res, err := sess.CallTool(ctx, p)
		ch <- auCall{res, err, time.Since(start)}
	}()
	return ch
}

// TestTracesServe: `mcpbox serve` with OTEL_EXPORTER_OTLP_ENDPOINT naming
// an in-process OTLP/HTTP receiver exports a span tree per call: the
// call's span is the child of the client's traceparent, with the policy
// decision, the approval wait (approved with `mcpbox approve`) and the
// upstream call under it; a call without a traceparent starts a trace
// whose id the audit record keeps; no argument or result appears in any
// span; the last spans are flushed when serve stops. With an exporter
// mcpbox does not speak, serve runs without traces and says so, naming
// the variable.
func TestTracesServe(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		recv := newTrReceiver(t)
		s := auConfig(t, m, "approvals: {timeout: 1m}\n", auApproveBox)
		otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url, "OTEL_SERVICE_NAME=mcpbox-e2e"}

		// An exporter mcpbox does not speak: served without traces, the
		// variable named (stdio with no client: serve ends at once).
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := m.command(ctx, "serve", "--config", s.cfg, "--stdio")
		cmd.Env = append(cmd.Env, append(otel, auTokenEnv+"="+s.token, "OTEL_TRACES_EXPORTER=zipkin")...)
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(string(out), "traces off") || !strings.Contains(string(out), "OTEL_TRACES_EXPORTER") {
			t.Fatalf("serve with OTEL_TRACES_EXPORTER=zipkin: exit %d (%v), want 0 and a warning naming the variable:\n%s", code, err, out)
		}
		recv.mu.Lock()
		n := len(recv.spans)
		recv.mu.Unlock()
		if n != 0 {
			t.Fatalf("serve with an unknown exporter exported %d spans", n)
		}

		g := gwServe(t, m, s.cfg, append(otel, auTokenEnv+"="+s.token)...)
		sess := s.connect(t, g, nil)
		secret := "argument-" + gwHex(8)
		const t1, p1 = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
		const t2, p2 = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		wantOK(t, await(t, trCall(sess, "echo", map[string]any{"text": secret}, "00-"+t1+"-"+p1+"-01")), secret)
		call := trCall(sess, "whoami", nil, "00-"+t2+"-"+p2+"-01")
		p := s.pendingFor(t, "whoami")
		if r := s.cli(t, "approve", p.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approve:\n%s", r)
		}
		wantOK(t, await(t, call), auServer)
		wantOK(t, await(t, trCall(sess, "echo", map[string]any{"text": secret + "-untraced"}, "")), secret+"-untraced")
		// The metrics fed by the audit: the approval's wait and the
		// sandbox's start latency, as histograms.
		base := strings.TrimSuffix(g.url, "/mcp")
		var waits, starts *dto.Histogram
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			fams := dashScrape(t, base+"/metrics", s.token)
			waits, starts = trHist(fams, "mcpbox_approval_wait_seconds", "approved"), trHist(fams, "mcpbox_sandbox_start_seconds", "")
			if waits.GetSampleCount() == 1 && starts.GetSampleCount() >= 1 {
				break
			}
		}
		if waits.GetSampleCount() != 1 || waits.GetSampleSum() <= 0 || waits.GetSampleSum() > 90 {
			t.Errorf("mcpbox_approval_wait_seconds{server=%s,decision=approved}: %v, want one wait", auServer, waits)
		}
		if starts.GetSampleCount() < 1 || starts.GetSampleSum() <= 0 || starts.GetSampleSum() > 60 {
			t.Errorf("mcpbox_sandbox_start_seconds{server=%s}: %v, want the start of its sandbox", auServer, starts)
		}
		gwClose(t, sess)
		g.stop(t) // flushes the spans

		recv.mu.Lock()
		defer recv.mu.Unlock()
		if len(recv.bad) > 0 {
			t.Fatalf("undecodable exports: %q", recv.bad)
		}
		if got := trAttr(recv.res, "service.name"); got != "mcpbox-e2e" {
			t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", got)
		}
		byID := map[string]*tracepb.Span{}
		kids := map[string][]string{}
		roots := map[string]*tracepb.Span{} // by trace id
		for _, sp := range recv.spans {
			byID[hex.EncodeToString(sp.SpanId)] = sp
			if strings.HasPrefix(sp.Name, "tools/call ") {
				roots[hex.EncodeToString(sp.TraceId)] = sp
			} else {
				kids[hex.EncodeToString(sp.ParentSpanId)] = append(kids[hex.EncodeToString(sp.ParentSpanId)], sp.Name)
			}
			for _, kv := range sp.Attributes {
				if strings.Contains(kv.GetValue().String(), "argument-") || strings.Contains(sp.Name, "argument-") {
					t.Errorf("span %s: attribute %s carries the argument", sp.Name, kv.Key)
				}
			}
		}
		for _, c := range []struct{ trace, parent, tool, decision string }{
			{t1, p1, "echo", "allow"}, {t2, p2, "whoami", "approved"},
		} {
			root := roots[c.trace]
			if root == nil {
				t.Errorf("no call span in the client's trace %s (spans: %d)", c.trace, len(recv.spans))
				continue
			}
			if got := hex.EncodeToString(root.ParentSpanId); got != c.parent || root.Kind != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("%s: call span's parent %s kind %v, want the client's %s, server", c.tool, got, root.Kind, c.parent)
			}
			if trAttr(root.Attributes, "gen_ai.tool.name") != c.tool || trAttr(root.Attributes, "mcpbox.server") != auServer ||
				trAttr(root.Attributes, "mcpbox.client") != auClient || trAttr(root.Attributes, "mcpbox.decision") != c.decision ||
				trAttr(root.Attributes, "mcpbox.outcome") != "ok" {
				t.Errorf("%s: call span attributes %v", c.tool, root.Attributes)
			}
			want := []string{"mcpbox.policy", "mcpbox.upstream"}
			if c.decision == "approved" {
				want = append(want, "mcpbox.approval")
			}
			got := kids[hex.EncodeToString(root.SpanId)]
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: children %v, want %v", c.tool, got, want)
			}
		}
		// The untraced call: the audit record names its new trace.
		recs := s.calls(t, "echo")
		if len(recs) != 2 {
			t.Fatalf("echo records: %v", recs)
		}
		detail := func(r auRecord) map[string]any { d, _ := r["detail"].(map[string]any); return d }
		if d := detail(recs[0]); d["traceparent"] != "00-"+t1+"-"+p1+"-01" || d["trace_id"] != nil {
			t.Errorf("traced call's record detail %v: want the client's traceparent, no trace_id", d)
		}
		id, _ := detail(recs[1])["trace_id"].(string)
		if root := roots[id]; id == "" || root == nil || len(root.ParentSpanId) != 0 {
			t.Errorf("untraced call's record: trace_id %q, want the id of an exported root call span", id)
		}
		if len(roots) != 3 {
			t.Errorf("%d call spans, want 3", len(roots))
		}
	})
}
