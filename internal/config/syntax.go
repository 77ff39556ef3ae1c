package config

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	yaml4 "go.yaml.in/yaml/v4"
)

// yaml.v3 reports a syntax error at the line where the block around the
// problem starts (its parser prefers the context mark to the problem
// mark) and without a column: "did not find expected key" for a key
// indented one space too far names the server's first line, not the
// key. go-yaml v4, the same libyaml port, keeps both marks in its
// LoadError, so the error is located with it; the config itself is still
// decoded with v3, whose nodes the schema reads.

// locateSyntax parses data again to find where its YAML syntax error is:
// the problem's position, its message, and what was being parsed where
// (the block the problem is in). ok is false if v4 finds no error or
// cannot place it; then the caller keeps v3's line.
func locateSyntax(data []byte) (p Pos, msg string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	dec := yaml4.NewDecoder(bytes.NewReader(data))
	for range 64 { // more documents than that are refused anyway
		var n yaml4.Node
		err := dec.Decode(&n)
		if err == nil {
			continue
		}
		var le *yaml4.LoadError
		if !errors.As(err, &le) || le.Mark.Line <= 0 {
			return Pos{}, "", false
		}
		msg = le.Message
		if le.Mark.Index >= len(bytes.TrimRight(data, " \t\r\n")) {
			msg += " at the end of the file"
		}
		if le.ContextMsg != "" && le.ContextMark.Line > 0 && le.ContextMark != le.Mark {
			msg += fmt.Sprintf(" (%s that starts at line %d, column %d)", le.ContextMsg, le.ContextMark.Line, le.ContextMark.Column)
		}
		return clampPos(data, Pos{le.Mark.Line, max(le.Mark.Column, 1)}), msg, true
	}
	return Pos{}, "", false
}

// yamlBreaks turns every line break YAML counts (CR LF, CR, NEL, LS, PS)
// into LF.
var yamlBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")

// clampPos keeps p inside data: a problem found past the last line (an
// input ending without a line break) is at the end of the last line.
func clampPos(data []byte, p Pos) Pos {
	lines := strings.Split(yamlBreaks.Replace(string(data)), "\n")
	if p.Line > len(lines) {
		p = Pos{len(lines), utf8.RuneCountInString(lines[len(lines)-1]) + 1}
	}
	if w := utf8.RuneCountInString(lines[p.Line-1]); p.Col > w+1 {
		p.Col = w + 1
	}
	return p
}
