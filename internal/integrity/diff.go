package integrity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"mcpbox/internal/textdiff"
)

const (
	// diffContext is the number of unchanged lines around a hunk, as in
	// `diff -u`.
	diffContext = 3
	// wrapWidth is the display width long string values are wrapped to.
	wrapWidth = 80
	// maxLCSCells bounds the line-matching table (4 MiB of int32); beyond
	// it the differing middle is shown as one removal and one addition.
	maxLCSCells = 1 << 20
)

// Diff renders c as a unified diff (like `diff -u`: ---/+++ headers naming
// server/kind/key, @@ hunks, 3 lines of context) between the old and new
// definitions pretty-printed with a 2-space indent. Long string values
// are broken after each sentence and at 80 columns so that one changed
// sentence of a description shows as one changed line; the wrapped text
// is for reading only, not valid JSON. A missing side is labelled "(not
// yet pinned)" or "(no longer offered)". Diff returns "" when the two
// sides render the same.
func Diff(c Change) string {
	old, cur := displayLines(c.Old), displayLines(c.New)
	ops := textdiff.Lines(old, cur, maxLCSCells)
	var b strings.Builder
	name := c.Server + "/" + c.Kind + "/" + c.Key
	fmt.Fprintf(&b, "--- %s\t%s\n", name, diffLabel("pinned", c.OldHash, c.Old))
	fmt.Fprintf(&b, "+++ %s\t%s\n", name, diffLabel("current", c.NewHash, c.New))
	if !writeHunks(&b, ops) {
		return ""
	}
	return b.String()
}

func diffLabel(side, hash string, def json.RawMessage) string {
	switch {
	case def == nil && side == "pinned":
		return "(not yet pinned)"
	case def == nil:
		return "(no longer offered)"
	case hash == "":
		return side
	}
	return side + " " + hash
}

// displayLines pretty-prints def and wraps its long string values.
func displayLines(def json.RawMessage) []string {
	if def == nil {
		return nil
	}
	var buf bytes.Buffer
	text := string(def)
	if json.Indent(&buf, def, "", "  ") == nil {
		text = buf.String()
	}
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		lines = append(lines, wrapLine(l)...)
	}
	return lines
}

// wrapLine splits a pretty-printed line whose string value is too long
// into the string's sentences and word-wrapped pieces, continued on lines
// indented two spaces deeper than the line itself.
func wrapLine(line string) []string {
	if len(line) <= wrapWidth {
		return []string{line}
	}
	open, end := valueString(line)
	if open < 0 {
		return []string{line}
	}
	indent := line[:len(line)-len(strings.TrimLeft(line, " "))] + "  "
	pieces := splitText(line[open+1:end], wrapWidth-len(indent))
	out := []string{line[:open+1] + pieces[0]}
	for _, p := range pieces[1:] {
		out = append(out, indent+p)
	}
	out[len(out)-1] += line[end:]
	return out
}

// valueString returns the offsets of the opening and closing quote of the
// line's value string (the second string after a key, else the first),
// or -1.
func valueString(line string) (open, end int) {
	open = strings.IndexByte(line, '"')
	if open < 0 {
		return -1, -1
	}
	end = closingQuote(line, open)
	if end < 0 {
		return -1, -1
	}
	if rest, ok := strings.CutPrefix(line[end+1:], `: "`); ok {
		open = len(line) - len(rest) - 1
		if end = closingQuote(line, open); end < 0 {
			return -1, -1
		}
	}
	return open, end
}

// closingQuote returns the offset of the quote closing the JSON string
// that opens at line[open], or -1.
func closingQuote(line string, open int) int {
	for i := open + 1; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// splitText splits escaped JSON string content after each sentence end
// and escaped newline, then wraps pieces longer than width at spaces.
// Concatenating the pieces gives s back.
func splitText(s string, width int) []string {
	var pieces []string
	start := 0
	for i := 0; i < len(s); i++ {
		brk := -1
		switch {
		case s[i] == '\\':
			if i+1 < len(s) && s[i+1] == 'n' {
				brk = i + 2
			}
			i++
		case strings.IndexByte(".!?", s[i]) >= 0 && i+1 < len(s) && s[i+1] == ' ':
			brk = i + 2
			i++
		}
		if brk > 0 && brk < len(s) {
			pieces = append(pieces, wrapWords(s[start:brk], width)...)
			start = brk
		}
	}
	return append(pieces, wrapWords(s[start:], width)...)
}

// wrapWords breaks s after spaces so each piece fits width where a space
// allows it.
func wrapWords(s string, width int) []string {
	width = max(width, 20)
	var out []string
	for len(s) > width {
		cut := strings.LastIndexByte(s[:width], ' ')
		if cut <= 0 {
			if cut = strings.IndexByte(s[width:], ' '); cut < 0 {
				break
			}
			cut += width
		}
		out = append(out, s[:cut+1])
		s = s[cut+1:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}

// diffOp is one line of an edit script.
type diffOp = textdiff.Op

// writeHunks writes the changes of ops as @@ hunks with diffContext lines
// of context, merging hunks whose context would touch. It reports whether
// there was any change.
func writeHunks(b *strings.Builder, ops []diffOp) bool {
	oldLine, newLine := 0, 0 // lines of each side before ops[i]
	changed := false
	for i := 0; i < len(ops); {
		c := i
		for c < len(ops) && ops[c].Kind == ' ' {
			c++
		}
		if c == len(ops) {
			break
		}
		changed = true
		start := max(i, c-diffContext)
		last := c
		for j := c; j < len(ops) && j-last <= 2*diffContext+1; j++ {
			if ops[j].Kind != ' ' {
				last = j
			}
		}
		end := min(len(ops), last+diffContext+1)
		for _, o := range ops[i:start] {
			oldLine, newLine = o.Advance(oldLine, newLine)
		}
		oldStart, newStart := oldLine, newLine
		var body strings.Builder
		for _, o := range ops[start:end] {
			body.WriteByte(o.Kind)
			body.WriteString(o.Text)
			body.WriteByte('\n')
			oldLine, newLine = o.Advance(oldLine, newLine)
		}
		fmt.Fprintf(b, "@@ -%s +%s @@\n%s", textdiff.Range(oldStart, oldLine-oldStart), textdiff.Range(newStart, newLine-newStart), body.String())
		i = end
	}
	return changed
}
