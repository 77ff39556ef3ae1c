package telemetry

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP ExportTraceServiceRequest (opentelemetry-proto's
// collector/trace/v1, trace/v1, common/v1 and resource/v1), encoded with
// protowire from the spans as the SDK's otlptrace exporters transform
// them. Not with the generated go.opentelemetry.io/proto/otlp types: those
// register their descriptors at package initialisation, and the package
// that serves them (collector/trace/v1) pulls in gRPC; every mcpbox
// process paid for both before main, the CLI's exec included (issue 19).
// The tests decode what this writes with the generated types.

// Field numbers of the messages written.
const (
	reqResourceSpans = 1 // ExportTraceServiceRequest

	rsResource   = 1 // ResourceSpans
	rsScopeSpans = 2
	rsSchemaURL  = 3

	resAttributes = 1 // Resource

	ssScope     = 1 // ScopeSpans
	ssSpans     = 2
	ssSchemaURL = 3

	scopeName       = 1 // InstrumentationScope
	scopeVersion    = 2
	scopeAttributes = 3

	spanTraceID         = 1 // Span
	spanSpanID          = 2
	spanTraceState      = 3
	spanParentSpanID    = 4
	spanName            = 5
	spanKind            = 6
	spanStart           = 7
	spanEnd             = 8
	spanAttributes      = 9
	spanDroppedAttrs    = 10
	spanEvents          = 11
	spanDroppedEvents   = 12
	spanLinks           = 13
	spanDroppedLinks    = 14
	spanStatus          = 15
	spanFlags           = 16
	eventTime           = 1 // Span.Event
	eventName           = 2
	eventAttributes     = 3
	eventDroppedAttrs   = 4
	linkTraceID         = 1 // Span.Link
	linkSpanID          = 2
	linkTraceState      = 3
	linkAttributes      = 4
	linkDroppedAttrs    = 5
	linkFlags           = 6
	statusMessage       = 2 // Status
	statusCode          = 3
	kvKey               = 1 // KeyValue
	kvValue             = 2
	anyString           = 1 // AnyValue
	anyBool             = 2
	anyInt              = 3
	anyDouble           = 4
	anyArray            = 5
	anyKvlist           = 6
	anyBytes            = 7
	listValues          = 1 // ArrayValue, KeyValueList
	flagHasIsRemote     = 0x100
	flagIsRemote        = 0x200
	statusCodeOK        = 1
	statusCodeError     = 2
	maxDroppedFieldSize = math.MaxUint32
)

// encodeRequest encodes spans as one ExportTraceServiceRequest: a
// ResourceSpans per resource, a ScopeSpans per scope within it, in the
// order first seen.
func encodeRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	type group struct {
		res    *resource.Resource
		scopes []scopeKey
	}
	var resOrder []attribute.Distinct
	groups := map[attribute.Distinct]*group{}
	bySpan := map[scopeKey][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		rk := s.Resource().Equivalent()
		g := groups[rk]
		if g == nil {
			g = &group{res: s.Resource()}
			groups[rk] = g
			resOrder = append(resOrder, rk)
		}
		k := scopeKey{rk, s.InstrumentationScope()}
		if _, ok := bySpan[k]; !ok {
			g.scopes = append(g.scopes, k)
		}
		bySpan[k] = append(bySpan[k], s)
	}
	var req []byte
	for _, rk := range resOrder {
		g := groups[rk]
		var rs []byte
		if g.res != nil {
			var res []byte
			for it := g.res.Iter(); it.Next(); {
				res = appendMessage(res, resAttributes, appendKeyValue(nil, it.Attribute()))
			}
			rs = appendMessage(rs, rsResource, res)
		}
		for _, k := range g.scopes {
			var ss []byte
			if k.scope != (instrumentation.Scope{}) {
				ss = appendMessage(ss, ssScope, appendScope(nil, k.scope))
			}
			for _, s := range bySpan[k] {
				ss = appendMessage(ss, ssSpans, appendSpan(nil, s))
			}
			ss = appendString(ss, ssSchemaURL, k.scope.SchemaURL)
			rs = appendMessage(rs, rsScopeSpans, ss)
		}
		if g.res != nil {
			rs = appendString(rs, rsSchemaURL, g.res.SchemaURL())
		}
		req = appendMessage(req, reqResourceSpans, rs)
	}
	return req
}

func appendScope(b []byte, s instrumentation.Scope) []byte {
	b = appendString(b, scopeName, s.Name)
	b = appendString(b, scopeVersion, s.Version)
	for it := s.Attributes.Iter(); it.Next(); {
		b = appendMessage(b, scopeAttributes, appendKeyValue(nil, it.Attribute()))
	}
	return b
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, tid[:])
	b = appendBytes(b, spanSpanID, sid[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, spanParentSpanID, psid[:])
	}
	b = appendString(b, spanName, s.Name())
	b = appendVarint(b, spanKind, uint64(otlpKind(s.SpanKind())))
	b = appendFixed64(b, spanStart, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, spanEnd, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendMessage(b, spanAttributes, appendKeyValue(nil, kv))
	}
	b = appendVarint(b, spanDroppedAttrs, clamp(s.DroppedAttributes()))
	for _, e := range s.Events() {
		var eb []byte
		eb = appendFixed64(eb, eventTime, unixNano(e.Time.UnixNano()))
		eb = appendString(eb, eventName, e.Name)
		for _, kv := range e.Attributes {
			eb = appendMessage(eb, eventAttributes, appendKeyValue(nil, kv))
		}
		eb = appendVarint(eb, eventDroppedAttrs, clamp(e.DroppedAttributeCount))
		b = appendMessage(b, spanEvents, eb)
	}
	b = appendVarint(b, spanDroppedEvents, clamp(s.DroppedEvents()))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		var lb []byte
		lb = appendBytes(lb, linkTraceID, ltid[:])
		lb = appendBytes(lb, linkSpanID, lsid[:])
		lb = appendString(lb, linkTraceState, l.SpanContext.TraceState().String())
		for _, kv := range l.Attributes {
			lb = appendMessage(lb, linkAttributes, appendKeyValue(nil, kv))
		}
		lb = appendVarint(lb, linkDroppedAttrs, clamp(l.DroppedAttributeCount))
		lb = appendFixed32(lb, linkFlags, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = appendMessage(b, spanLinks, lb)
	}
	b = appendVarint(b, spanDroppedLinks, clamp(s.DroppedLinks()))
	var st []byte
	st = appendString(st, statusMessage, s.Status().Description)
	switch s.Status().Code {
	case codes.Ok:
		st = appendVarint(st, statusCode, statusCodeOK)
	case codes.Error:
		st = appendVarint(st, statusCode, statusCodeError)
	}
	b = appendMessage(b, spanStatus, st)
	return appendFixed32(b, spanFlags, flags(sc.TraceFlags(), parent))
}

// flags are the W3C trace flags and whether the parent is remote (known).
func flags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// otlpKind maps a span kind to OTLP's SpanKind (the same numbers, but an
// unknown one is unspecified).
func otlpKind(k trace.SpanKind) trace.SpanKind {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return trace.SpanKindUnspecified
	}
	return k
}

func appendKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = appendString(b, kvKey, string(kv.Key))
	return protowire.AppendBytes(protowire.AppendTag(b, kvValue, protowire.BytesType), appendAnyValue(nil, kv.Value))
}

// appendAnyValue encodes v's oneof field (nothing for an empty value).
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendBool(b, anyBool, v.AsBool())
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, anyInt, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, anyDouble, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), v.AsString())
	case attribute.BYTESLICE:
		return protowire.AppendBytes(protowire.AppendTag(b, anyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		var list []byte
		for _, kv := range v.AsMap() {
			list = appendMessage(list, listValues, appendKeyValue(nil, kv))
		}
		return protowire.AppendBytes(protowire.AppendTag(b, anyKvlist, protowire.BytesType), list)
	case attribute.EMPTY:
		return b
	default:
		return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), "INVALID")
	}
}

func appendArray[T any](b []byte, vs []T, value func(T) attribute.Value) []byte {
	var arr []byte
	for _, v := range vs {
		arr = protowire.AppendBytes(protowire.AppendTag(arr, listValues, protowire.BytesType), appendAnyValue(nil, value(v)))
	}
	return protowire.AppendBytes(protowire.AppendTag(b, anyArray, protowire.BytesType), arr)
}

// The append functions below leave out a proto3 default (zero, empty),
// as proto.Marshal does; appendMessage always writes its (possibly
// empty) message.

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), msg)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), protowire.EncodeBool(v))
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

func clamp(n int) uint64 { return uint64(min(max(n, 0), maxDroppedFieldSize)) }
