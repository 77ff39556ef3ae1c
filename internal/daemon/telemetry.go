package daemon

import (
	"context"
	"time"

	"mcpbox/internal/telemetry"
)

// telemetryFlush bounds the export of the last spans at shutdown.
const telemetryFlush = 5 * time.Second

// startTelemetry builds the trace pipeline the OTEL_* variables ask for
// (internal/telemetry); nil when they ask for none. A variable mcpbox
// cannot honour (another exporter or protocol) turns traces off with a
// warning that names it: OTEL_* variables are often set for a whole
// session, for other programs, and traces are no reason not to serve.
func (d *daemon) startTelemetry(ctx context.Context) (*telemetry.Provider, error) {
	p, err := telemetry.FromEnv(ctx, d.o.Version, d.log)
	if err != nil {
		d.log.Warn("traces off", "err", err)
		return nil, nil
	}
	if p != nil {
		d.log.Info("exporting traces over OTLP/HTTP", "endpoint", p.Endpoint)
	}
	return p, nil
}

// stopTelemetry exports the spans still buffered. It runs after the
// gateway closed (no call is in flight, every span has ended) and before
// the guard closes.
func (d *daemon) stopTelemetry(p *telemetry.Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), telemetryFlush)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		d.log.Warn("flushing traces", "err", err)
	}
}
