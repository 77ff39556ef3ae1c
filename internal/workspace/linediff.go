//go:build linux

package workspace

import (
	"bufio"
	"fmt"
	"strings"
)

// The line diff below is a minimal copy of internal/integrity/diff.go's
// (LCS over the differing middle, hunks as GNU diff prints them), changed
// to keep each line's terminator so a missing final newline shows. It is
// duplicated rather than shared because integrity's is unexported and
// tied to its JSON rendering; two callers do not yet justify a package.

const (
	diffContext = 3
	// maxLCSCells bounds the matching table (16 MiB of int32); beyond it
	// the differing middle is shown as one removal and one addition.
	maxLCSCells = 1 << 22
)

type diffOp struct {
	kind byte // ' ' kept, '-' removed, '+' added
	text string
}

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

func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for _, l := range a[:pre] {
		ops = append(ops, diffOp{' ', l})
	}
	ops = append(ops, lcsOps(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, diffOp{' ', l})
	}
	return ops
}

func lcsOps(a, b []string) []diffOp {
	n, m := len(a), len(b)
	var ops []diffOp
	if n*m > maxLCSCells {
		for _, l := range a {
			ops = append(ops, diffOp{'-', l})
		}
		for _, l := range b {
			ops = append(ops, diffOp{'+', l})
		}
		return ops
	}
	// t[i*(m+1)+j] is the LCS length of a[i:] and b[j:].
	t := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return t[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i*(m+1)+j] = at(i+1, j+1) + 1
			} else {
				t[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i, j = i+1, j+1
		case i < n && (j == m || at(i+1, j) >= at(i, j+1)):
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	return ops
}

// writeHunks writes the changes of ops as @@ hunks with diffContext lines
// of context, merging hunks whose context would touch.
func writeHunks(w *bufio.Writer, ops []diffOp) {
	oldLine, newLine := 0, 0 // lines of each side before ops[i]
	for i := 0; i < len(ops); {
		c := i
		for c < len(ops) && ops[c].kind == ' ' {
			c++
		}
		if c == len(ops) {
			return
		}
		start, last := max(i, c-diffContext), c
		for j := c; j < len(ops) && j-last <= 2*diffContext+1; j++ {
			if ops[j].kind != ' ' {
				last = j
			}
		}
		end := min(len(ops), last+diffContext+1)
		for _, o := range ops[i:start] {
			oldLine, newLine = advance(o, oldLine, newLine)
		}
		o0, n0 := oldLine, newLine
		for _, o := range ops[start:end] {
			oldLine, newLine = advance(o, oldLine, newLine)
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(o0, oldLine-o0), hunkRange(n0, newLine-n0))
		for _, o := range ops[start:end] {
			w.WriteByte(o.kind)
			w.WriteString(o.text)
			if !strings.HasSuffix(o.text, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
}

func advance(o diffOp, oldLine, newLine int) (int, int) {
	if o.kind != '+' {
		oldLine++
	}
	if o.kind != '-' {
		newLine++
	}
	return oldLine, newLine
}

// hunkRange formats a hunk side as GNU diff does: an empty range names
// the line before it, a one-line range omits its length.
func hunkRange(before, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprint(before + 1)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}
