package guard

// OpenTelemetry spans of a call (Options.Tracer; internal/telemetry
// builds it from the OTEL_* variables). The call's span has the client's
// traceparent (_meta) as its parent and children for the policy
// decision, the approval wait and the upstream call (under it, the
// sandbox's start or thaw when the call caused one). Attributes name the
// server, tool, client, decision and outcome only: never an argument, a
// result or an error text (which may quote either).

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"mcpbox/internal/audit"
	"mcpbox/internal/gateway"
)

// Span and attribute names.
const (
	SpanCall     = "tools/call"
	SpanPolicy   = "mcpbox.policy"
	SpanApproval = "mcpbox.approval"
	SpanUpstream = "mcpbox.upstream"
	SpanSandbox  = "mcpbox.sandbox.start"
	SpanWake     = "mcpbox.sandbox.wake"

	AttrServer   = "mcpbox.server"
	AttrTool     = "gen_ai.tool.name"
	AttrClient   = "mcpbox.client"
	AttrDecision = "mcpbox.decision"
	AttrOutcome  = "mcpbox.outcome"
	AttrMethod   = "mcp.method.name"
)

// traced opens the call's span (child of the client's traceparent),
// wraps the upstream call in a child span, and records the span's trace
// id in the audit record when it is not the client's. Without a tracer
// it is not in the way at all.
func (g *Guard) traced(next handler) handler {
	if g.tracer == nil {
		return next
	}
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		c, rec := st.c, st.rec
		parent := ctx
		if c.Trace != "" {
			parent = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": c.Trace})
		}
		ctx, span := g.tracer.Start(parent, SpanCall+" "+rec.Name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String(AttrMethod, "tools/call"), attribute.String(AttrServer, c.Server),
				attribute.String(AttrTool, c.Tool), attribute.String(AttrClient, c.Agent)))
		defer span.End()
		if sc := span.SpanContext(); sc.IsSampled() && trace.SpanContextFromContext(parent).TraceID() != sc.TraceID() {
			if rec.Detail == nil {
				rec.Detail = map[string]string{}
			}
			rec.Detail[audit.DetailTraceID] = sc.TraceID().String()
		}
		up, hadSandbox := st.next, st.t != nil
		paused := hadSandbox && st.t.State() == gateway.StatePaused
		st.next = func(ctx context.Context) (json.RawMessage, error) {
			ctx, s := g.tracer.Start(ctx, SpanUpstream, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String(AttrServer, c.Server), attribute.String(AttrTool, c.Tool)))
			began := time.Now()
			raw, err := up(ctx)
			if !hadSandbox {
				g.sandboxSpan(ctx, st, began)
			} else if paused {
				g.wakeSpan(ctx, st, began)
			}
			if err != nil {
				s.SetStatus(codes.Error, outcomeOf(err))
			}
			s.End()
			return raw, err
		}
		raw, err := next(ctx, st)
		span.SetAttributes(attribute.String(AttrDecision, rec.Decision), attribute.String(AttrOutcome, rec.Outcome))
		switch rec.Outcome {
		case audit.OutcomeError, audit.OutcomeProtocolError, audit.OutcomeTimeout:
			span.SetStatus(codes.Error, rec.Outcome)
		}
		return raw, err
	}
}

// sandboxSpan adds the start of the sandbox that the upstream call
// started (none ran for the call's scope before it), from its track: it
// began at t.Started and was up when the guard registered it (Ready).
func (g *Guard) sandboxSpan(ctx context.Context, st *callState, began time.Time) {
	t := g.tracks.Get(st.gs.launcher, st.c.Scope)
	if t == nil || t.Started.Before(began) || t.Ready.IsZero() {
		return
	}
	_, s := g.tracer.Start(ctx, SpanSandbox, trace.WithTimestamp(t.Started),
		trace.WithAttributes(attribute.String(AttrServer, st.c.Server)))
	s.End(trace.WithTimestamp(t.Ready))
}

// wakeSpan adds the thaw of the call's sandbox, paused when the call
// went upstream (the gateway resumes it before passing the call on):
// from then until the launcher reported it resumed.
func (g *Guard) wakeSpan(ctx context.Context, st *callState, began time.Time) {
	if r := st.t.Resumed(); r.After(began) {
		_, s := g.tracer.Start(ctx, SpanWake, trace.WithTimestamp(began), trace.WithAttributes(attribute.String(AttrServer, st.c.Server)))
		s.End(trace.WithTimestamp(r))
	}
}

// span opens a child span of the call's; end closes it with attrs. A
// no-op without a tracer.
func (g *Guard) span(ctx context.Context, name string) (context.Context, func(attrs ...attribute.KeyValue)) {
	if g.tracer == nil {
		return ctx, func(...attribute.KeyValue) {}
	}
	ctx, s := g.tracer.Start(ctx, name)
	return ctx, func(attrs ...attribute.KeyValue) {
		s.SetAttributes(attrs...)
		s.End()
	}
}
