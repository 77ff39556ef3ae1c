// Package telemetry sets up OpenTelemetry tracing for `mcpbox serve`
// from the standard OTEL_* variables: spans exported over OTLP/HTTP
// (protobuf) to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT. Off by default: without an endpoint (or
// with OTEL_TRACES_EXPORTER=none, or OTEL_SDK_DISABLED=true) FromEnv
// returns nil and nothing is exported or even recorded. An exporter or a
// protocol mcpbox does not speak (zipkin, grpc) is an error naming its
// variable ([Enabled]), not silently dropped traces.
//
// The resource is service.name "mcpbox" and the version, overridden by
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the sampler is the
// SDK's (OTEL_TRACES_SAMPLER, by default parentbased_always_on); export
// errors go to the log and never fail a call. [Provider.Shutdown] flushes
// what is buffered.
//
// The exporter is its own (export.go, encode.go), not the SDK's
// otlptracehttp, which links gRPC into every mcpbox process.
//
// It only builds the exporter and the tracer provider; what goes into a
// span is the guard's (internal/guard/trace.go). It imports no other
// mcpbox package.
package telemetry
