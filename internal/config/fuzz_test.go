package config

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzLoadPositions loads (parses and validates) arbitrary YAML. Property:
// every error names the file, and a positioned error points inside the
// input: a line that exists and a column at most one past its end.
func FuzzLoadPositions(f *testing.F) {
	for _, s := range []string{
		base,
		base + "    limits: {memory: 1X, cpu: -1}\n",
		base + "    network: {egress: [{host: '*.', ports: [0]}]}\n",
		base + "    tools: {rules: [{tool: '[', action: maybe}]}\n",
		"version: 2\nservers:\n  'A B':\n    command: []\n",
		"version: 1\nservers:\n  s:\n    command: [x]\n    url: http://h/\n",
		"version: 1\nclients: [{name: _x, token: {from: 'env:'}}]\nservers: {}\n",
		"\tversion: 1\n",
		"version: 1\nservers:\n  s:\n    command: [\"\\u00e9\"]\n    bogus: 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Load("f.yaml", data)
		if err == nil {
			return
		}
		es := AsErrors(err)
		if len(es) == 0 {
			t.Fatalf("Load error is not an Errors: %v", err)
		}
		utf16 := strings.HasPrefix(string(data), "\xff\xfe") || strings.HasPrefix(string(data), "\xfe\xff")
		lines := strings.Split(yamlBreaks.Replace(string(data)), "\n")
		for _, e := range es {
			if e.File != "f.yaml" {
				t.Fatalf("error does not name the file: %#v", e)
			}
			if e.Line == 0 || utf16 {
				continue // yaml.v3 reads a UTF-16 file (BOM) in UTF-16
			}
			if e.Line < 1 || e.Line > len(lines) || e.Col < 1 {
				t.Fatalf("error at %d:%d of a %d-line input: %v", e.Line, e.Col, len(lines), e)
			}
			if w := utf8.RuneCountInString(lines[e.Line-1]); e.Col > w+1 {
				t.Fatalf("error at column %d of a %d-character line %q: %v", e.Col, w, lines[e.Line-1], e)
			}
		}
	})
}
