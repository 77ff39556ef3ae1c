//go:build linux

package workspace

import (
	"bufio"
	"fmt"
	"strings"

	"mcpbox/internal/textdiff"
)

// Hunks as GNU diff prints them, over internal/textdiff's edit script;
// each line keeps its terminator so a missing final newline shows.

const (
	diffContext = 3
	// maxLCSCells bounds the matching table (16 MiB of int32); beyond it
	// the differing middle is shown as one removal and one addition.
	maxLCSCells = 1 << 22
)

type diffOp = textdiff.Op

// splitLines splits s after each newline; the last line may lack one.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return append(lines, s)
		}
		lines, s = append(lines, s[:i+1]), s[i+1:]
	}
	return lines
}

// writeHunks writes the changes of ops as @@ hunks with diffContext lines
// of context, merging hunks whose context would touch.
func writeHunks(w *bufio.Writer, ops []diffOp) {
	oldLine, newLine := 0, 0 // lines of each side before ops[i]
	for i := 0; i < len(ops); {
		c := i
		for c < len(ops) && ops[c].Kind == ' ' {
			c++
		}
		if c == len(ops) {
			return
		}
		start, last := max(i, c-diffContext), c
		for j := c; j < len(ops) && j-last <= 2*diffContext+1; j++ {
			if ops[j].Kind != ' ' {
				last = j
			}
		}
		end := min(len(ops), last+diffContext+1)
		for _, o := range ops[i:start] {
			oldLine, newLine = o.Advance(oldLine, newLine)
		}
		o0, n0 := oldLine, newLine
		for _, o := range ops[start:end] {
			oldLine, newLine = o.Advance(oldLine, newLine)
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", textdiff.Range(o0, oldLine-o0), textdiff.Range(n0, newLine-n0))
		for _, o := range ops[start:end] {
			w.WriteByte(o.Kind)
			w.WriteString(o.Text)
			if !strings.HasSuffix(o.Text, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
}
