package conventions

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// heavyInit are packages kept out of the mcpbox binary because of what
// their initialisation (and that of what they pull in) costs every
// mcpbox process before main, the CLI's `mcpbox exec -- CMD` included
// (issue 19, docs/performance.md): each prefix with why and what
// replaced it.
var heavyInit = map[string]string{
	"github.com/prometheus/client_golang/": "internal/metrics writes the text format itself",
	"github.com/prometheus/procfs":         "internal/metrics reads /proc/self itself",
	"expvar":                               "nothing of mcpbox's publishes expvars",
	"google.golang.org/grpc":               "internal/telemetry exports OTLP/HTTP with its own exporter (otlptracehttp links gRPC)",
	"go.opentelemetry.io/proto/otlp/":      "internal/telemetry encodes OTLP with protowire (the generated types register descriptors at init)",
	"go.opentelemetry.io/otel/exporters/":  "internal/telemetry has its own OTLP/HTTP exporter",
	"github.com/Masterminds/semver":        "internal/pkginstall reads versions and ranges itself (semver.go; Masterminds compiles 6 regexps at init)",
}

// TestNoHeavyInitDependency: `go list -deps ./cmd/mcpbox` names none of
// heavyInit.
func TestNoHeavyInitDependency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "mcpbox/cmd/mcpbox")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed only %d packages", len(deps))
	}
	for _, p := range deps {
		for prefix, why := range heavyInit {
			if p == prefix || strings.HasPrefix(p, prefix) {
				t.Errorf("mcpbox links %s, whose package initialisation every mcpbox process pays; %s (go mod why %s)", p, why, p)
			}
		}
	}
}
