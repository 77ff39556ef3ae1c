// Package textdiff computes line edit scripts for the unified diffs mcpbox
// prints: changed tool definitions (internal/integrity) and the changes a
// sandbox made to its overlaid input (internal/workspace). It is a longest
// common subsequence over the differing middle, bounded in memory.
package textdiff

import "strconv"

// Op is one line of an edit script.
type Op struct {
	Kind byte // ' ' kept, '-' removed, '+' added
	Text string
}

// Lines returns an edit script from a to b with as many kept lines as a
// longest common subsequence gives. The common prefix and suffix are kept
// as they are; when the differing middle would need a table of more than
// maxCells entries, it is shown as one removal and one addition.
// Removals come before additions within a changed run, as diff prints
// them.
func Lines(a, b []string, maxCells int) []Op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []Op
	for _, l := range a[:pre] {
		ops = append(ops, Op{' ', l})
	}
	ops = append(ops, lcs(a[pre:len(a)-suf], b[pre:len(b)-suf], maxCells)...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, Op{' ', l})
	}
	return ops
}

// lcs is the textbook dynamic program.
func lcs(a, b []string, maxCells int) []Op {
	n, m := len(a), len(b)
	var ops []Op
	if n*m > maxCells {
		for _, l := range a {
			ops = append(ops, Op{'-', l})
		}
		for _, l := range b {
			ops = append(ops, Op{'+', l})
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
			ops = append(ops, Op{' ', a[i]})
			i, j = i+1, j+1
		case i < n && (j == m || at(i+1, j) >= at(i, j+1)):
			ops = append(ops, Op{'-', a[i]})
			i++
		default:
			ops = append(ops, Op{'+', b[j]})
			j++
		}
	}
	return ops
}

// Advance moves the line numbers of both sides past op.
func (o Op) Advance(oldLine, newLine int) (int, int) {
	if o.Kind != '+' {
		oldLine++
	}
	if o.Kind != '-' {
		newLine++
	}
	return oldLine, newLine
}

// Range formats one side of a hunk header as GNU diff does: n lines after
// line before; an empty range names the line before it, a one-line range
// omits its length.
func Range(before, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(before) + ",0"
	case 1:
		return strconv.Itoa(before + 1)
	}
	return strconv.Itoa(before+1) + "," + strconv.Itoa(n)
}
