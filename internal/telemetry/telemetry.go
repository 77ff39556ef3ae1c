package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of mcpbox's spans unless
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
// otherwise.
const ServiceName = "mcpbox"

// TracerName is the instrumentation scope of mcpbox's spans.
const TracerName = "mcpbox"

// The variables FromEnv reads itself (the exporter and the resource read
// the other OTEL_EXPORTER_OTLP_* and OTEL_RESOURCE_ATTRIBUTES ones).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvExporter       = "OTEL_TRACES_EXPORTER"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Provider is a running trace pipeline: a tracer provider with a batch
// exporter. Shutdown flushes what is buffered and stops it.
type Provider struct {
	tp       *sdktrace.TracerProvider
	Endpoint string // where spans go, its password hidden (for the log)
}

// Tracer is mcpbox's tracer; a nil Provider gives nil (no tracing).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tp.Tracer(TracerName)
}

// Shutdown exports the spans still buffered and stops the exporter,
// waiting at most as long as ctx allows. A nil Provider does nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// Enabled says whether the environment asks for traces: an OTLP endpoint
// is set, OTEL_TRACES_EXPORTER is not "none" and OTEL_SDK_DISABLED is
// not "true". An unsupported exporter or protocol is an error (named
// with the variable), not silently ignored.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false, nil
	}
	exp := strings.TrimSpace(getenv(EnvExporter))
	for e := range strings.SplitSeq(exp, ",") {
		switch strings.TrimSpace(e) {
		case "", "otlp":
		case "none":
			return false, nil
		default:
			return false, fmt.Errorf("%s=%q: mcpbox exports traces over otlp (or none)", EnvExporter, exp)
		}
	}
	if getenv(EnvTracesEndpoint) == "" && getenv(EnvEndpoint) == "" {
		return false, nil
	}
	for _, k := range []string{EnvTracesProtocol, EnvProtocol} {
		switch v := strings.TrimSpace(getenv(k)); v {
		case "", "http/protobuf":
		default:
			return false, fmt.Errorf("%s=%q: mcpbox exports traces over http/protobuf only", k, v)
		}
		if getenv(k) != "" {
			break // the traces one wins over the general one
		}
	}
	return true, nil
}

// FromEnv builds the trace pipeline the process environment asks for;
// nil, nil when it asks for none. Export errors go to log (they never
// fail a call).
func FromEnv(ctx context.Context, version string, log *slog.Logger) (*Provider, error) {
	on, err := Enabled(os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	exp, err := newExporter(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", ServiceName)}
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	// WithFromEnv last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("the trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("exporting traces", "err", err) }))
	}
	// The sampler is the SDK's: OTEL_TRACES_SAMPLER, by default
	// parentbased_always_on (a client's unsampled trace stays unsampled).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	// exp.shown, not the URL: the endpoint may carry a password
	// (http://user:pass@host), and Endpoint goes to the log.
	return &Provider{tp: tp, Endpoint: exp.shown}, nil
}

func endpoint(getenv func(string) string) string {
	if e := getenv(EnvTracesEndpoint); e != "" {
		return e
	}
	return strings.TrimRight(getenv(EnvEndpoint), "/") + "/v1/traces"
}
