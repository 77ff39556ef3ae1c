package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestEnabled: traces are off unless an OTLP endpoint is set; "none" and
// OTEL_SDK_DISABLED turn them off; an exporter or protocol mcpbox does
// not speak is an error naming the variable.
func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		err  string
	}{
		{"nothing set", nil, false, ""},
		{"exporter alone", map[string]string{EnvExporter: "otlp"}, false, ""},
		{"endpoint", map[string]string{EnvEndpoint: "http://127.0.0.1:4318"}, true, ""},
		{"traces endpoint", map[string]string{EnvTracesEndpoint: "http://127.0.0.1:4318/v1/traces"}, true, ""},
		{"none", map[string]string{EnvEndpoint: "http://x", EnvExporter: "none"}, false, ""},
		{"sdk disabled", map[string]string{EnvEndpoint: "http://x", EnvSDKDisabled: "true"}, false, ""},
		{"http/protobuf", map[string]string{EnvEndpoint: "http://x", EnvProtocol: "http/protobuf"}, true, ""},
		{"zipkin", map[string]string{EnvEndpoint: "http://x", EnvExporter: "zipkin"}, false, EnvExporter},
		{"grpc", map[string]string{EnvEndpoint: "http://x", EnvProtocol: "grpc"}, false, EnvProtocol},
		{"traces protocol wins", map[string]string{EnvEndpoint: "http://x", EnvProtocol: "grpc", EnvTracesProtocol: "http/protobuf"}, true, ""},
		{"traces grpc", map[string]string{EnvEndpoint: "http://x", EnvTracesProtocol: "grpc"}, false, EnvTracesProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, err := Enabled(func(k string) string { return tc.env[k] })
			if on != tc.on || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Enabled = %v, %v; want %v, error naming %q", on, err, tc.on, tc.err)
			}
		})
	}
}

// TestOffByDefault: without OTEL_* variables there is no provider, no
// tracer, and shutting the nil provider down is fine.
func TestOffByDefault(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, EnvExporter, EnvProtocol, EnvTracesProtocol, EnvSDKDisabled} {
		t.Setenv(k, "")
	}
	p, err := FromEnv(context.Background(), "v", nil)
	if err != nil || p != nil {
		t.Fatalf("FromEnv = %v, %v; want nil, nil", p, err)
	}
	if p.Tracer() != nil || p.Shutdown(context.Background()) != nil {
		t.Fatal("a nil provider traces")
	}
}

// TestProviderEndpointHidesPassword: the endpoint the daemon logs at
// start does not carry the password an OTLP endpoint URL may hold.
func TestProviderEndpointHidesPassword(t *testing.T) {
	for _, k := range []string{EnvTracesEndpoint, EnvExporter, EnvProtocol, EnvTracesProtocol, EnvSDKDisabled} {
		t.Setenv(k, "")
	}
	t.Setenv(EnvEndpoint, "http://user:s3cret@127.0.0.1:1")
	p, err := FromEnv(context.Background(), "v", nil)
	if err != nil || p == nil {
		t.Fatalf("FromEnv = %v, %v", p, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = p.Shutdown(ctx)
	}()
	if strings.Contains(p.Endpoint, "s3cret") || !strings.Contains(p.Endpoint, "127.0.0.1:1/v1/traces") {
		t.Fatalf("Endpoint = %q; want the URL without its password", p.Endpoint)
	}
}
