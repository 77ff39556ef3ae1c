package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Copies of testdata/rugpull's instructions.
const (
	igInstrBenign  = "Tools to fetch data: call fetch_data with a URL."
	igInstrBenign3 = "Fetching tools. fetch_data takes a URL and returns its text."
)

// igInstructions connects a client to a gateway serving cfg, lists the
// tools (which pins them on first sight) and returns the instructions it
// got at initialize.
func igInstructions(t *testing.T, m mode, cfg string) string {
	t.Helper()
	g, sess, _, ctx := igSession(t, m, cfg)
	got := sess.InitializeResult().Instructions
	igList(t, ctx, sess)
	gwClose(t, sess)
	g.stop(t)
	return got
}

// TestIntegrityInstructionsRugPull: a server's initialize instructions are
// pinned like its tools. When the server changes them between runs, the
// gateway withholds the new text from clients, `pin --check` reports it
// with a diff, and `mcpbox trust` lets it through.
func TestIntegrityInstructionsRugPull(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := gwDir(t, m)
		cfg := igConfigIn(t, m, dir, igOpts{args: []string{"-instructions", "1"}})
		if got := igInstructions(t, m, cfg); got != igInstrBenign {
			t.Fatalf("first run: instructions %q, want %q (pinned on first sight)", got, igInstrBenign)
		}
		lock, err := os.ReadFile(lockBeside(cfg))
		if err != nil || !strings.Contains(string(lock), igInstrBenign) {
			t.Fatalf("the lock file lacks the instructions (%v):\n%s", err, lock)
		}
		want(t, igCLI(t, m, "pin", "--check", "--config", cfg), 0, "every definition matches")

		// The server changes its instructions; the tools stay the same.
		igConfigIn(t, m, dir, igOpts{args: []string{"-instructions", "3"}})
		r := igCLI(t, m, "pin", "--check", "--config", cfg)
		want(t, r, 1, "changed instructions rugpull/instructions")
		if !strings.Contains(igPlusText(r.stdout), igInstrBenign3) {
			t.Errorf("pin --check does not show the new instructions as added:\n%s", r)
		}

		g, sess, _, _ := igSession(t, m, cfg)
		if got := sess.InitializeResult().Instructions; strings.Contains(got, "Fetching tools") {
			t.Fatalf("the changed instructions reached the client: %q", got)
		}
		// The audit is written in batches: wait for the record.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			var changed bool
			for _, rec := range igAudit(t, m, cfg, "--event", "pin") {
				d, _ := rec["detail"].(map[string]any)
				changed = changed || rec["decision"] == "changed" && d["kind"] == "instructions"
			}
			if changed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no pin record of the changed instructions within 20 s")
			}
		}
		want(t, igCLI(t, m, "trust", "rugpull", "--config", cfg), 0, "changed instructions rugpull/instructions", "trusted 1")
		gwClose(t, sess)
		// A trusted text reaches the next session (instructions are sent
		// once, at initialize).
		ctx := t.Context()
		sess2 := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		if got := sess2.InitializeResult().Instructions; got != igInstrBenign3 {
			t.Errorf("after trust: instructions %q, want %q", got, igInstrBenign3)
		}
		gwClose(t, sess2)
		g.stop(t)
	})
}

// TestIntegrityInstructionsScanBlock: poisoned instructions are dropped with
// scan: block and the finding is audited; `pin --check` names them.
func TestIntegrityInstructionsScanBlock(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := igConfig(t, m, igOpts{args: []string{"-instructions", "2"}, fields: map[string]any{"scan": "block"}})
		if got := igInstructions(t, m, cfg); strings.Contains(got, "id_rsa") || strings.Contains(got, "fetch data") {
			t.Fatalf("scan: block let the poisoned instructions through: %q", got)
		}
		var found bool
		for _, rec := range igAudit(t, m, cfg, "--event", "scan") {
			d, _ := rec["detail"].(map[string]any)
			found = found || d["kind"] == "instructions" && rec["decision"] == "block" && rec["tool"] == "instructions"
		}
		if !found {
			t.Errorf("no scan record of the poisoned instructions")
		}
		want(t, igCLI(t, m, "pin", "--check", "--config", cfg), 1, "rugpull/instructions: ")
	})
}
