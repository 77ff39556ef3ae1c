package telemetry

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP receiver that decodes each request with the
// generated OTLP types and answers with the statuses in script, then 200.
type collector struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []int
	reqs   []*collectortrace.ExportTraceServiceRequest
	hdrs   []http.Header
	errs   []error
}

func newCollector(t *testing.T, script ...int) *collector {
	c := &collector{script: script}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.script) > 0 {
			code := c.script[0]
			c.script = c.script[1:]
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(code)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				c.errs = append(c.errs, err)
				w.WriteHeader(400)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		msg := &collectortrace.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(raw, msg)
		}
		if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			c.errs = append(c.errs, err)
			w.WriteHeader(400)
			return
		}
		c.reqs = append(c.reqs, msg)
		c.hdrs = append(c.hdrs, r.Header.Clone())
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// TestExportDecodes: spans with every attribute type, events, links, a
// remote parent, a status and two scopes, exported through the SDK, come
// out of the generated OTLP types as the SDK's otlptrace transform would
// make them; headers and gzip as the environment says.
func TestExportDecodes(t *testing.T) {
	c := newCollector(t)
	env := map[string]string{
		EnvEndpoint:                         c.srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS":        "x-a=1,authorization=Bearer%20tok",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-b=2",
		"OTEL_EXPORTER_OTLP_COMPRESSION":    "gzip",
	}
	exp, err := newExporter(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "svc"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	link := trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}}),
		Attributes: []attribute.KeyValue{attribute.Int("n", 0)}}
	_, span := tp.Tracer("scope-a", trace.WithInstrumentationVersion("v1")).Start(ctx, "call",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithLinks(link))
	span.SetAttributes(
		attribute.String("s", ""), attribute.Bool("b", false), attribute.Int64("i", -7),
		attribute.Float64("f", 1.5), attribute.StringSlice("ss", []string{"x", ""}),
		attribute.Int64Slice("is", []int64{1, -2}), attribute.BoolSlice("bs", []bool{true}),
		attribute.Float64Slice("fs", []float64{0, 2.5}),
	)
	span.AddEvent("ev", trace.WithAttributes(attribute.String("k", "v")))
	span.SetStatus(codes.Error, "broken")
	span.End()
	_, other := tp.Tracer("scope-b").Start(context.Background(), "other")
	other.SetStatus(codes.Ok, "")
	other.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) > 0 || len(c.reqs) != 2 {
		t.Fatalf("collector: %d requests, errors %v", len(c.reqs), c.errs)
	}
	h := c.hdrs[0]
	if h.Get("X-A") != "" || h.Get("X-B") != "2" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("headers %v: want the TRACES_ ones (x-b) and gzip", h)
	}
	rs := c.reqs[0].ResourceSpans
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 || len(rs[0].ScopeSpans[0].Spans) != 1 {
		t.Fatalf("request 1: %v", c.reqs[0])
	}
	if got := rs[0].Resource.Attributes; len(got) != 1 || got[0].Key != "service.name" || got[0].Value.GetStringValue() != "svc" {
		t.Errorf("resource %v", got)
	}
	if sc := rs[0].ScopeSpans[0].Scope; sc.GetName() != "scope-a" || sc.GetVersion() != "v1" {
		t.Errorf("scope %v", sc)
	}
	s := rs[0].ScopeSpans[0].Spans[0]
	sc := span.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	if string(s.TraceId) != string(tid[:]) || string(s.SpanId) != string(sid[:]) || string(s.ParentSpanId) != string([]byte{4, 5, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("ids: trace %x span %x parent %x", s.TraceId, s.SpanId, s.ParentSpanId)
	}
	if s.Name != "call" || s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Flags != 0x301 {
		t.Errorf("name %q kind %v flags %#x", s.Name, s.Kind, s.Flags)
	}
	if s.StartTimeUnixNano == 0 || s.EndTimeUnixNano < s.StartTimeUnixNano {
		t.Errorf("times %d %d", s.StartTimeUnixNano, s.EndTimeUnixNano)
	}
	if s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || s.Status.GetMessage() != "broken" {
		t.Errorf("status %v", s.Status)
	}
	want := map[string]*commonpb.AnyValue{
		"s":  {Value: &commonpb.AnyValue_StringValue{}},
		"b":  {Value: &commonpb.AnyValue_BoolValue{}},
		"i":  {Value: &commonpb.AnyValue_IntValue{IntValue: -7}},
		"f":  {Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}},
		"ss": arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "x"}}, &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{}}),
		"is": arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -2}}),
		"bs": arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
		"fs": arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{}}, &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 2.5}}),
	}
	if len(s.Attributes) != len(want) {
		t.Errorf("%d attributes, want %d", len(s.Attributes), len(want))
	}
	for _, kv := range s.Attributes {
		if !proto.Equal(kv.Value, want[kv.Key]) {
			t.Errorf("attribute %s = %v, want %v", kv.Key, kv.Value, want[kv.Key])
		}
	}
	if len(s.Events) != 1 || s.Events[0].Name != "ev" || s.Events[0].TimeUnixNano == 0 || s.Events[0].Attributes[0].Value.GetStringValue() != "v" {
		t.Errorf("events %v", s.Events)
	}
	if len(s.Links) != 1 || s.Links[0].TraceId[0] != 9 || s.Links[0].SpanId[0] != 8 || s.Links[0].Flags != 0x100 ||
		len(s.Links[0].Attributes) != 1 || s.Links[0].Attributes[0].Value.GetValue() == nil {
		t.Errorf("links %v", s.Links)
	}
	o := c.reqs[1].ResourceSpans[0].ScopeSpans[0]
	if o.Scope.GetName() != "scope-b" || o.Spans[0].Status.GetCode() != tracepb.Status_STATUS_CODE_OK || len(o.Spans[0].ParentSpanId) != 0 || o.Spans[0].Flags != 0x101 {
		t.Errorf("second span %v", o)
	}
}

func arr(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

// TestExportRetries: 503 and 429 are retried until the collector takes
// the spans; 400 is not; retries end at maxRetry.
func TestExportRetries(t *testing.T) {
	span := func(t *testing.T) sdktrace.ReadOnlySpan {
		rec := &recorder{}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(rec))
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
		return rec.spans[0]
	}
	for _, tc := range []struct {
		name   string
		script []int
		ok     bool
		reqs   int
	}{
		{"503 then 429 then ok", []int{503, 429}, true, 1},
		{"400", []int{400}, false, 0},
		{"503 for longer than maxRetry", []int{503, 503, 503, 503, 503, 503, 503, 503, 503, 503}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCollector(t, tc.script...)
			exp, err := newExporter(func(k string) string { return map[string]string{EnvTracesEndpoint: c.srv.URL + "/v1/traces"}[k] })
			if err != nil {
				t.Fatal(err)
			}
			exp.backoff, exp.maxRetry = 10*time.Millisecond, 200*time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = exp.ExportSpans(ctx, []sdktrace.ReadOnlySpan{span(t)})
			if (err == nil) != tc.ok {
				t.Errorf("ExportSpans = %v, want ok %v", err, tc.ok)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.reqs) != tc.reqs {
				t.Errorf("%d requests taken, want %d", len(c.reqs), tc.reqs)
			}
		})
	}
}

type recorder struct{ spans []sdktrace.ReadOnlySpan }

func (r *recorder) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	r.spans = append(r.spans, s...)
	return nil
}
func (r *recorder) Shutdown(context.Context) error { return nil }

// TestExporterConfig: the environment's values, and the errors that name
// a bad one.
func TestExporterConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string
	}{
		{"endpoint", map[string]string{EnvEndpoint: "http://127.0.0.1:4318/"}, ""},
		{"not a URL", map[string]string{EnvEndpoint: "127.0.0.1:4318"}, "not an http(s) URL"},
		{"timeout", map[string]string{EnvEndpoint: "http://x", "OTEL_EXPORTER_OTLP_TIMEOUT": "250"}, ""},
		{"bad timeout", map[string]string{EnvEndpoint: "http://x", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1s"}, "TIMEOUT"},
		{"bad compression", map[string]string{EnvEndpoint: "http://x", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "COMPRESSION"},
		{"bad header", map[string]string{EnvEndpoint: "http://x", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "HEADERS"},
		{"missing CA", map[string]string{EnvEndpoint: "https://x", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, "CERTIFICATE"},
		{"key without cert", map[string]string{EnvEndpoint: "https://x", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/nonexistent/k.pem"}, "CLIENT_CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := newExporter(func(k string) string { return tc.env[k] })
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("newExporter = %v; want an error naming %q", err, tc.err)
			}
			if err == nil && tc.name == "endpoint" && e.url != "http://127.0.0.1:4318/v1/traces" {
				t.Errorf("url %q", e.url)
			}
			if err == nil && tc.name == "timeout" && e.timeout != 250*time.Millisecond {
				t.Errorf("timeout %v", e.timeout)
			}
		})
	}
	h, err := parseHeaders(" a = b%2Cc , ,x=y=z")
	if err != nil || len(h) != 2 || h["a"] != "b,c" || h["x"] != "y=z" {
		t.Errorf("parseHeaders = %v, %v", h, err)
	}
}

// TestExportErrorHidesPassword: an endpoint's password is not in the
// errors (they go to the log), whether the collector refuses or is gone.
func TestExportErrorHidesPassword(t *testing.T) {
	c := newCollector(t, 400)
	for _, base := range []string{c.srv.URL, "http://127.0.0.1:1"} {
		u := strings.Replace(base, "http://", "http://user:s3cret@", 1)
		exp, err := newExporter(func(k string) string { return map[string]string{EnvEndpoint: u}[k] })
		if err != nil {
			t.Fatal(err)
		}
		exp.maxRetry = 0
		rec := &recorder{}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(rec))
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
		err = exp.ExportSpans(context.Background(), rec.spans)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error %v; want one without the password", base, err)
		}
	}
	if _, err := newExporter(func(k string) string { return map[string]string{EnvEndpoint: "ftp://u:s3cret@x"}[k] }); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad endpoint: %v", err)
	}
}

// TestExportRedirectKeepsHeaders: a collector that redirects to another
// origin does not get the exporter to send there the headers of
// OTEL_EXPORTER_OTLP_HEADERS (API keys; net/http strips only
// Authorization and cookies on such a redirect) or the spans.
func TestExportRedirectKeepsHeaders(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	t.Cleanup(other.Close)
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusFound} {
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/v1/traces", code)
		}))
		t.Cleanup(redirect.Close)
		exp, err := newExporter(func(k string) string {
			return map[string]string{EnvTracesEndpoint: redirect.URL + "/v1/traces", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cret"}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		exp.maxRetry = 0
		rec := &recorder{}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(rec))
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = exp.ExportSpans(ctx, rec.spans)
		cancel()
		if err == nil {
			t.Errorf("%d to another origin: exported", code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range got {
		if h.Get("X-Api-Key") != "" {
			t.Errorf("the other origin got the exporter's header: %v", h)
		}
	}
	if len(got) != 0 {
		t.Errorf("the other origin got %d requests", len(got))
	}
}

// TestExportRedirectSameOrigin: a redirect within the endpoint's origin
// is still followed, headers and all.
func TestExportRedirectSameOrigin(t *testing.T) {
	var key string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			http.Redirect(w, r, "/v1/traces/", http.StatusPermanentRedirect)
			return
		}
		key = r.Header.Get("X-Api-Key")
	}))
	t.Cleanup(srv.Close)
	exp, err := newExporter(func(k string) string {
		return map[string]string{EnvTracesEndpoint: srv.URL + "/v1/traces", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cret"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(rec))
	_, s := tp.Tracer("t").Start(context.Background(), "s")
	s.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := exp.ExportSpans(ctx, rec.spans); err != nil || key != "s3cret" {
		t.Errorf("ExportSpans = %v, header at the redirect's target %q", err, key)
	}
}
