package conventions

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// layers places every package of the module. A package may import only
// packages of a lower layer, so nothing imports "up" and the CLI stays the
// only place that sees everything. docs/architecture.md draws the same
// table; a new package needs a line in both.
var layers = map[string]int{
	// 0: leaves. Each does one thing and imports no other mcpbox package.
	"internal/approval": 0, "internal/audit": 0, "internal/bearer": 0,
	"internal/cgroup": 0, "internal/config": 0,
	"internal/egress": 0, "internal/gateway": 0,
	"internal/image": 0, "internal/instance": 0, "internal/kube": 0, "internal/landlock": 0,
	"internal/oauth": 0, "internal/redact": 0, "internal/seccomp": 0,
	"internal/secrets": 0, "internal/textdiff": 0,
	// The OTLP trace exporter set up from the OTEL_* variables.
	"internal/telemetry": 0,
	// Signals a child's process group by pidfd, never a reused number.
	"internal/procgroup": 0,
	// The limit on open files the process started with, before Go
	// raised it: what the sandbox's children get back.
	"internal/nofile": 0,
	// Pseudo-terminals for tests (serve's transport, the banner, a
	// workload that takes its terminal).
	"internal/ptytest": 0,
	// Which local user is at the other end of a loopback TCP connection.
	"internal/tcppeer": 0,
	// The sending side of the egress proxy's connection hand-over, apart
	// so that the lean sandbox init does not link the proxy.
	"internal/egress/handover": 0,
	// 1: mechanisms built on one or two leaves.
	"internal/integrity": 1, "internal/policy": 1, "internal/sandbox": 1,
	"internal/workspace": 1, "internal/load": 1, "internal/credinject": 1,
	// The sandbox's init, a part of internal/sandbox split off so that the
	// lean init binary links none of the host side (on landlock and
	// egress/handover).
	"internal/sandbox/initproc": 1,
	// The built-in tools and the group supervisor kill process groups
	// through procgroup.
	"internal/builtin": 1, "internal/group": 1,
	// Prometheus metrics counted from the audit records.
	"internal/metrics": 1,
	// The agent in a Kubernetes pod, its mTLS CA and the gateway's client
	// (on the gateway's message limits and response-id reader).
	"internal/podagent": 1,
	// 2: conversions and services: config to spec, client configs to
	// config, the admin sockets.
	"internal/specconv": 2, "internal/importer": 2, "internal/admin": 2,
	// The per-sandbox records the launcher fills and the guard reads: it
	// joins egress events, workspace files and audit records.
	"internal/track": 2,
	// Packages installed through sandboxes into a shared store.
	"internal/pkginstall": 2,
	// The egress proxy of a gateway's Kubernetes pods (mcpbox egress-proxy),
	// on credinject and podagent's mutual TLS.
	"internal/kube/egressproxy": 2,
	// 3: the call pipeline and the backends that start servers.
	"internal/guard": 3, "internal/launch": 3,
	// The web page over the admin back-end and the audit trail.
	"internal/dashboard": 3,
	// 4: serve as a library.
	"internal/daemon": 4,
	// 5: flags, help, output, exit codes.
	"internal/cli": 5,
	"cmd/mcpbox":   6, "cmd/mcpbox-load": 6, "cmd/mcpbox-init": 6,
	// Tests only.
	"internal/conventions": 7, "test/e2e": 7,
	// A real control plane and test node for the Kubernetes tests.
	"internal/kube/kubetest": 7,
}

func TestNoPackageImportsUp(t *testing.T) {
	root, _ := filepath.Abs("../..")
	const module = "mcpbox/"
	for dir, files := range goFiles(t) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "test/e2e/") || strings.HasPrefix(rel, "scripts") {
			continue // test programs and tools
		}
		mine, ok := layers[rel]
		if !ok {
			t.Errorf("%s: not in the layer table; give it a layer here and in docs/architecture.md", rel)
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, imp := range imports(t, f) {
				dep, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				l, known := layers[dep]
				if known && l == mine && strings.HasPrefix(dep, rel+"/") {
					continue // a part split off the package itself
				}
				if !known || l >= mine {
					t.Errorf("%s imports %s: only lower layers may be imported (layer %d imports %s)", f, imp, mine, layerName(known, l))
				}
			}
		}
	}
}

func layerName(known bool, l int) string {
	if !known {
		return "a package with no layer"
	}
	return "layer " + strconv.Itoa(l)
}

// TestArchitectureDocListsLayers keeps docs/architecture.md's layer table
// true: every package of the layer table that exists is named (as `path`)
// in the row of its layer.
func TestArchitectureDocListsLayers(t *testing.T) {
	root, _ := filepath.Abs("../..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int]string{} // layer -> its row of the table
	for line := range strings.Lines(string(doc)) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(cells[1])); err == nil {
			rows[n] = cells[2]
		}
	}
	var wrong []string
	for pkg, l := range layers {
		if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
			continue
		}
		if !strings.Contains(rows[l], "`"+pkg+"`") {
			wrong = append(wrong, pkg+" (layer "+strconv.Itoa(l)+")")
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		t.Errorf("docs/architecture.md's layer table does not name %v in the row of their layer", wrong)
	}
}
