package config

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pos is a 1-based line and column in the config file. The zero Pos means
// the value did not come from a file (for example a config built from flags).
type Pos struct {
	Line, Col int
}

// Error is one problem in a config, located at File:Line:Col.
type Error struct {
	File      string
	Line, Col int
	Msg       string
	// Stops, on a warning about this host rather than the config, is what
	// it keeps from starting here: "server NAME", "serve over HTTP" or
	// "serve". policy check sums these up beside its "valid".
	Stops string
}

// Verdict is what policy check says of a valid config with the warnings
// es: "ok", or, where they keep something from starting on this machine,
// each thing they stop, once, in order. Either way the exit status is 0:
// the config may be checked for another machine.
func (es Errors) Verdict() string {
	var stops []string
	for _, e := range es {
		if e.Stops != "" && !slices.Contains(stops, e.Stops) {
			stops = append(stops, e.Stops)
		}
	}
	if len(stops) == 0 {
		return "ok"
	}
	return "valid, but on this machine cannot start: " + strings.Join(stops, ", ") + " (see the warnings above)"
}

// Error formats e as "FILE:LINE:COL: message", leaving out the parts that
// are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(Printable(e.File))
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	b.WriteString(Printable(e.Msg))
	return b.String()
}

// Printable is s with each character a terminal would act on (escape
// sequences, carriage returns, other controls, bidirectional overrides)
// written as a Go escape (\x1b, \r, \u202e), line breaks and tabs kept:
// a name, value or symlink target that a config or a project chooses is
// shown as it is and cannot clear the screen, forge a line ("mcpbox.yaml:
// ok") or hide the warning after it.
//
// A byte that is not UTF-8 is written as \xNN too: a terminal in an 8-bit
// locale reads 0x9b as the start of a control sequence.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, ActsOnTerminal) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case ActsOnTerminal(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// PrintableLine is Printable on one line: a line break is written as \n
// too, so that a value printed in a line of mcpbox's cannot start a line
// of its own.
func PrintableLine(s string) string { return Printable(strings.ReplaceAll(s, "\n", `\n`)) }

// ShellQuote quotes s for a POSIX shell where it needs it, for a message
// that names a command to run with a path or name someone else chose.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ActsOnTerminal reports whether a terminal acts on r rather than shows
// it: controls (C0, DEL, C1) but line breaks and tabs, the bidirectional
// marks, embeddings, overrides and isolates, and the Unicode line and
// paragraph separators.
func ActsOnTerminal(r rune) bool {
	switch {
	case r == '\n', r == '\t':
		return false
	case unicode.IsControl(r), r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x2028 && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Errors is every problem found in a config, ordered by position.
// Parse, Validate and Load return a non-empty Errors or nil.
type Errors []*Error

// Error joins the errors one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// AsErrors returns the Errors inside err, or nil if there are none.
func AsErrors(err error) Errors {
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	return nil
}

// collector gathers errors for one file.
type collector struct {
	file string
	errs Errors
}

func (c *collector) errorf(p Pos, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: p.Line, Col: p.Col, Msg: fmt.Sprintf(format, args...)})
}

// err returns the collected errors sorted by position, or nil. Sorting is
// stable so that errors at the same position keep the order of the checks.
func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	sort.SliceStable(c.errs, func(i, j int) bool {
		a, b := c.errs[i], c.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return c.errs
}
