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
// cannot honour (another exporter or protocol) stops serve with an error
// that names it.
func (d *daemon) startTelemetry(ctx context.Context) (*telemetry.Provider, error) {
	p, err := telemetry.FromEnv(ctx, d.o.Version, d.log)
	if err != nil {
		return nil, configError(err)
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
