package e2e

import (
	"strings"
	"testing"
	"unicode"
)

// TestLogsQuoteWorkloadFileNames: a workload writes a file whose name holds
// a newline, an OSC title escape and a bidi override. `mcpbox logs` prints
// the call as one line, the name quoted, with no control character; --json
// gives the name back exactly.
func TestLogsQuoteWorkloadFileNames(t *testing.T) {
	const name = "x\n999 2026-12-01 10:00:00.000 call          decision=allow\x1b]0;pwned\x07\u202egnp.exe"
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", "      output: {}\n    tools: {allow: [\"*\"]}\n")
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		wantOK(t, await(t, callAsync(sess, "note_write", map[string]any{"name": name, "text": "hi"})), "ok")
		gwClose(t, sess)
		g.stop(t)

		r := s.cli(t, "logs", "--config", s.cfg, "--event", "call", "--tool", "note_write")
		if r.code != 0 {
			t.Fatalf("mcpbox logs:\n%s", r)
		}
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if len(lines) != 1 {
			t.Fatalf("one call printed as %d lines:\n%s", len(lines), r.stdout)
		}
		for _, c := range lines[0] {
			if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || unicode.Is(unicode.Cf, c) {
				t.Fatalf("the line holds %U: %q", c, lines[0])
			}
		}
		if want := `file="/workspace/output/x\n999 2026`; !strings.Contains(lines[0], want) {
			t.Errorf("the line lacks %s: %q", want, lines[0])
		}

		recs := s.calls(t, "note_write")
		if len(recs) != 1 {
			t.Fatalf("%d note_write records, want 1", len(recs))
		}
		files := recs[0].list("files")
		if len(files) != 1 || files[0]["path"] != "/workspace/output/"+name {
			t.Errorf("logs --json files %v, want the path /workspace/output/%q", files, name)
		}
	})
}
