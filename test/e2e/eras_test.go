package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestErasSandboxes: a 2025 and a 2026-07-28 client of one server, in one
// scope, get a sandbox each (a server speaks one revision per
// connection). Both show in mcpbox ps; each call's audit record names the
// sandbox that ran it, also once the other era's has started; and mcpbox
// stop stops the sandbox it names, not the other era's.
func TestErasSandboxes(t *testing.T) {
	m := modes(t)[0]
	s := auConfig(t, m, "", "    tools: {allow: [\"*\"]}\n")
	g := s.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hc := &http.Client{Transport: gwBearer{token: s.token, base: &http.Transport{}}}
	legacy := gwConnect(t, ctx, g.url, hc, nil, gwLegacy)
	modern := gwConnect(t, ctx, g.url, hc, nil, "2026-07-28")

	// legacy, modern, legacy: the third call runs while both sandboxes do.
	l1 := gwMustCall(t, legacy, "instance", nil, "")
	m1 := gwMustCall(t, modern, "instance", nil, "")
	if l1 == m1 {
		t.Fatalf("the 2025 and the 2026 client share the server process %q", l1)
	}
	gwMustCall(t, legacy, "instance", nil, l1)

	var running []string
	era := map[string]string{}
	for _, row := range s.ps(t) {
		if row.Server == auServer && row.State == "running" {
			running = append(running, row.ID)
			era[row.ID] = row.Era
		}
	}
	if len(running) != 2 {
		t.Fatalf("mcpbox ps shows running sandboxes %v of %s, want two (one per era): %+v", running, auServer, s.ps(t))
	}
	recs := s.calls(t, "instance")
	if len(recs) != 3 {
		t.Fatalf("want three instance call records, got %v", recs)
	}
	legacyBox, modernBox := recs[0].str("sandbox"), recs[1].str("sandbox")
	if legacyBox == modernBox || !slices.Contains(running, legacyBox) || !slices.Contains(running, modernBox) {
		t.Fatalf("records name sandboxes %q (2025) and %q (2026), want the two running %v", legacyBox, modernBox, running)
	}
	if era[legacyBox] != "" || era[modernBox] != "2026-07-28" {
		t.Errorf("mcpbox ps shows eras %q (2025 client's) and %q (2026's), want \"\" and 2026-07-28", era[legacyBox], era[modernBox])
	}
	if got := recs[2].str("sandbox"); got != legacyBox {
		t.Fatalf("the 2025 client's call after the 2026 sandbox started is joined to %q, want its own %q", got, legacyBox)
	}

	if r := s.cli(t, "stop", legacyBox, "--config", s.cfg); r.code != 0 {
		t.Fatalf("mcpbox stop %s (the 2025 client's sandbox): %s", legacyBox, r)
	}
	gwMustCall(t, modern, "instance", nil, m1) // the other era's is untouched
	if l2 := gwMustCall(t, legacy, "instance", nil, ""); l2 == l1 || l2 == m1 {
		t.Fatalf("after mcpbox stop the 2025 client's call ran in %q (before: %q, the 2026 one's: %q), want a new instance", l2, l1, m1)
	}
}
