//go:build linux

package builtin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteInput(t *testing.T) { bothResolvers(t, testWriteInput) }

// testWriteInput: write_file and edit_file reach input/ only when it is
// writable (an overlay in the sandbox); by default it stays read-only.
func testWriteInput(t *testing.T) {
	for _, writable := range []bool{false, true} {
		w := newWorkspace(t, Options{InputWritable: writable})
		writeHost(t, filepath.Join(w.in, "a.txt"), "one\ntwo\n")
		writes := []struct {
			tool string
			args map[string]any
		}{
			{"edit_file", map[string]any{"path": "input/a.txt", "old": "two", "new": "TWO"}},
			{"write_file", map[string]any{"path": "/workspace/input/sub/new.txt", "content": "fresh\n"}},
		}
		for _, c := range writes {
			if writable {
				w.mustOK(t, c.tool, c.args)
			} else {
				w.mustFail(t, c.tool, c.args, "input is read-only; write under output/")
			}
		}
		a, _ := os.ReadFile(filepath.Join(w.in, "a.txt"))
		n, err := os.ReadFile(filepath.Join(w.in, "sub", "new.txt"))
		switch {
		case writable && (string(a) != "one\nTWO\n" || string(n) != "fresh\n"):
			t.Errorf("writable input: a.txt %q, sub/new.txt %q (%v); want the edit and the new file", a, n, err)
		case !writable && (string(a) != "one\ntwo\n" || err == nil):
			t.Errorf("read-only input changed: a.txt %q, sub/new.txt %q", a, n)
		}
		// The agent is told which it is.
		tools, err := w.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			if tool.Name != "write_file" && tool.Name != "edit_file" {
				continue
			}
			if got := strings.Contains(tool.Description, "or input/"); got != writable {
				t.Errorf("writable %v: %s description %q", writable, tool.Name, tool.Description)
			}
		}
		if got := strings.Contains(w.cs.InitializeResult().Instructions, "writable"); got != writable {
			t.Errorf("writable %v: instructions %q", writable, w.cs.InitializeResult().Instructions)
		}
	}
}

func TestInputHidden(t *testing.T) { bothResolvers(t, testInputHidden) }

// testInputHidden: the output dir inside the input is neither listed,
// searched, read, written nor entered under input/.
func testInputHidden(t *testing.T) {
	const marker = "hidden-output-marker"
	hidden := func(w *workspace) {
		writeHost(t, filepath.Join(w.in, "mcpbox-out", "report.txt"), marker+"\n")
		writeHost(t, filepath.Join(w.in, "mcpbox-outside.txt"), "not hidden\n")
		writeHost(t, filepath.Join(w.out, "report.txt"), marker+"\n")
	}
	shows := func(w *workspace) string {
		var all []string
		all = append(all, w.mustOK(t, "list_files", map[string]any{"depth": 4}))
		all = append(all, w.mustOK(t, "list_files", map[string]any{"path": "input", "glob": "*", "depth": 4}))
		all = append(all, w.mustOK(t, "search_files", map[string]any{"pattern": marker}))
		all = append(all, w.mustOK(t, "search_files", map[string]any{"pattern": marker, "path": "input"}))
		return strings.Join(all, "\n")
	}

	// Without the option, the same calls do show it: the test can fail.
	plain := newWorkspace(t, Options{})
	hidden(plain)
	if got := shows(plain); !strings.Contains(got, "input/mcpbox-out/") || !strings.Contains(got, "input/mcpbox-out/report.txt:1:") {
		t.Fatalf("without InputHidden the listing lacks input/mcpbox-out:\n%s", got)
	}

	w := newWorkspace(t, Options{InputHidden: []string{"mcpbox-out"}, InputWritable: true})
	hidden(w)
	got := shows(w)
	if strings.Contains(got, "input/mcpbox-out/") || strings.Contains(got, "input/mcpbox-out/report.txt") {
		t.Errorf("input/mcpbox-out shows:\n%s", got)
	}
	for _, want := range []string{"input/mcpbox-outside.txt", "output/report.txt:1:" + marker} {
		if !strings.Contains(got, want) {
			t.Errorf("%s is missing:\n%s", want, got)
		}
	}
	const refusal = "is not shown in input/"
	for _, p := range []string{"input/mcpbox-out/report.txt", "/workspace/input/mcpbox-out/report.txt", "input/./mcpbox-out//report.txt", "input/sub/../mcpbox-out/report.txt"} {
		w.mustFail(t, "read_file", map[string]any{"path": p}, refusal)
	}
	w.mustFail(t, "list_files", map[string]any{"path": "input/mcpbox-out"}, refusal)
	w.mustFail(t, "search_files", map[string]any{"pattern": marker, "path": "input/mcpbox-out"}, refusal)
	w.mustFail(t, "write_file", map[string]any{"path": "input/mcpbox-out/x.txt", "content": "x"}, refusal)
	w.mustFail(t, "edit_file", map[string]any{"path": "input/mcpbox-out/report.txt", "old": "hidden", "new": "x"}, refusal)
	w.mustFail(t, "run_command", map[string]any{"argv": []string{"ls"}, "cwd": "input/mcpbox-out"}, refusal)
	if _, err := os.Stat(filepath.Join(w.in, "mcpbox-out", "x.txt")); err == nil {
		t.Error("write_file wrote into the hidden dir")
	}
}
