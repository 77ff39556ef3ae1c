package conventions

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cliMaxLines bounds internal/cli's non-test Go files, counted as wc -l
// does (newlines): the command line parses flags, prints and wires; what
// grows past this is logic that belongs in a package below it. It is a
// tripwire with room for a few more commands: when it trips, move the
// logic that made it trip, do not raise it.
const cliMaxLines = 2700

// cliForbidden are the imports that would mean the command line talks to
// the kernel itself: signals, syscalls and raw memory belong to the
// packages it wires (sandbox, daemon).
var cliForbidden = []string{"syscall", "golang.org/x/sys/unix", "unsafe", "os/signal"}

// TestCLIIsWiring keeps internal/cli flags, help, output, exit codes and
// wiring (docs/architecture.md): no syscalls, and under cliMaxLines.
func TestCLIIsWiring(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(root, "internal", "cli")
	lines := 0
	for dir, files := range goFiles(t) {
		if dir != cli && !strings.HasPrefix(dir, cli+string(filepath.Separator)) {
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, imp := range imports(t, f) {
				if slices.Contains(cliForbidden, imp) {
					t.Errorf("%s imports %s: the command line makes no syscalls; move that code to the package it wires", f, imp)
				}
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines += bytes.Count(src, []byte("\n"))
		}
	}
	if lines == 0 {
		t.Fatal("no Go files found in internal/cli")
	}
	if lines >= cliMaxLines {
		t.Errorf("internal/cli has %d lines of non-test Go (wc -l), want under %d: move logic (not lines) into the packages it wires", lines, cliMaxLines)
	}
}
