package conventions

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// leanInitHeavy are packages the lean sandbox init (cmd/mcpbox-init) must
// not link: Go runs the initialisers of every linked package at each
// sandbox start, before the init does anything (issue 19,
// internal/sandbox/initproc). Each package, or with a trailing slash
// each package below a path, with what needed it before.
var leanInitHeavy = map[string]string{
	"net":                        "the egress listeners; they are raw sockets now (net's cgo resolver links libc, which costs every start ~1 ms to load)",
	"runtime/cgo":                "package net (libc: a dynamically linked init)",
	"net/http":                   "the egress proxy (internal/egress); the init sends with internal/egress/handover",
	"crypto/":                    "the egress proxy's TLS interception and the host side's ids",
	"encoding/asn1":              "x509 (the egress proxy's CA)",
	"compress/":                  "net/http and debug/buildinfo",
	"debug/":                     "the lean-init build check (internal/sandbox/initbin_linux.go), host side",
	"runtime/debug":              "the lean-init build check, host side",
	"mime":                       "net/http",
	"log":                        "logrus, through cgroups",
	"os/user":                    "cgroups",
	"github.com/":                "cgroups, dbus, systemd, logrus, securejoin: the host side's cgroup limits",
	"mcpbox/internal/egress":     "the egress proxy (its handover sub-package is allowed)",
	"mcpbox/internal/cgroup":     "the host side's cgroup limits",
	"mcpbox/internal/seccomp":    "the host assembles the filter; the init takes its bytes",
	"mcpbox/internal/sandbox":    "the host side (its initproc sub-package is the init)",
	"golang.org/x/net/http2":     "HTTP/2",
	"golang.org/x/net/internal/": "the egress proxy",
	"google.golang.org/":         "the gateway",
	"go.opentelemetry.io/":       "the gateway",
}

// leanInitAllowed are the exceptions to leanInitHeavy.
var leanInitAllowed = map[string]bool{
	"mcpbox/internal/egress/handover":  true,
	"mcpbox/internal/sandbox/initproc": true,
}

// TestLeanInitDependencies: `go list -deps ./cmd/mcpbox-init` names none of
// leanInitHeavy, and stays small.
func TestLeanInitDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "mcpbox/cmd/mcpbox-init")
	cmd.Env = append(cmd.Environ(), "GOOS=linux")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps listed only %d packages", len(deps))
	}
	for _, p := range deps {
		if leanInitAllowed[p] || strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "vendor/") {
			continue // the standard library's internals
		}
		for heavy, why := range leanInitHeavy {
			if p == heavy || strings.HasSuffix(heavy, "/") && strings.HasPrefix(p, heavy) {
				t.Errorf("mcpbox-init links %s, whose package initialisation every sandbox start pays; it came with %s (go mod why / go list -deps to see who imports it)", p, why)
			}
		}
	}
	// 82 when this test was written (an empty program: ~45); the host side
	// brought 222.
	if len(deps) > 110 {
		t.Errorf("mcpbox-init links %d packages, want at most 110: what does the init need them for?", len(deps))
	}
}
