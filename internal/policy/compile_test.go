package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/config"
)

// badRules has one broken when per rule; the columns in TestCompileErrors
// are counted by hand from this text.
const badRules = `version: 1
servers:
  s:
    command: [s]
    tools:
      rules:
        - tool: a
          when: tool > 3
          action: allow
        - {tool: b, when: "tool ==", action: deny}
        - tool: c
          when: 'args.x'
          action: allow
        - tool: d
          when: |
            tool == "x" &&
            nope
          action: allow
        - tool: e
          when: "tool == \"a\" && 1"
          action: deny
        - tool: f
          when: tool.startsWith("a") && foo
          action: deny
`

func TestCompileErrors(t *testing.T) {
	c, err := config.Load("c.yaml", []byte(badRules))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		line, col int
		msg       string // a substring of Msg after the rule's path
	}
	wants := []want{
		{8, 22, "found no matching overload for '_>_' applied to '(string, int)'"}, // value at 17, '>' 5 further
		{10, 35, "Syntax error"},                         // '"' at 27, text at 28, end of "tool ==" 7 further
		{12, 17, "must be a bool expression, got dyn"},   // at the value
		{15, 17, "undeclared reference to 'nope'"},       // block scalar: at the value ('|')
		{20, 17, "expected type 'bool' but found 'int'"}, // escapes before the error: at the value
		{23, 41, "undeclared reference to 'foo'"},        // value at 17, "foo" 24 further
	}
	_, err = CompileWith(c, Options{Source: []byte(badRules)})
	var es *Errors
	if !errors.As(err, &es) {
		t.Fatalf("CompileWith error = %v, want *Errors", err)
	}
	if len(es.Problems) != len(wants) {
		t.Fatalf("got %d problems, want %d:\n%v", len(es.Problems), len(wants), err)
	}
	for i, w := range wants {
		p := es.Problems[i]
		if p.File != "c.yaml" || p.Line != w.line || p.Col != w.col {
			t.Errorf("problem %d at %s:%d:%d, want c.yaml:%d:%d (%s)", i, p.File, p.Line, p.Col, w.line, w.col, p.Msg)
		}
		prefix := "servers.s.tools.rules[" + string(rune('0'+i)) + "].when: "
		if !strings.HasPrefix(p.Msg, prefix) || !strings.Contains(p.Msg, w.msg) {
			t.Errorf("problem %d = %q, want %q...%q", i, p.Msg, prefix, w.msg)
		}
	}
	if first := strings.Split(err.Error(), "\n")[0]; first != `c.yaml:8:22: servers.s.tools.rules[0].when: found no matching overload for '_>_' applied to '(string, int)'` {
		t.Errorf("first line = %q", first)
	}

	// Without the source a value is taken to be plain: right for rule 0 and
	// rule 5, one column short (at the quote) for the quoted rule 1.
	_, err = Compile(c)
	if !errors.As(err, &es) || len(es.Problems) != len(wants) {
		t.Fatalf("Compile error = %v", err)
	}
	got := []config.Pos{}
	for _, i := range []int{0, 1, 5} {
		got = append(got, config.Pos{Line: es.Problems[i].Line, Col: es.Problems[i].Col})
	}
	if diff := cmp.Diff([]config.Pos{{Line: 8, Col: 22}, {Line: 10, Col: 34}, {Line: 23, Col: 41}}, got); diff != "" {
		t.Errorf("positions without source (-want +got):\n%s", diff)
	}
}

func TestCompileNonBool(t *testing.T) {
	for _, expr := range []string{`tool + "x"`, `args.n`, `1`, `args.list.size()`} {
		c, err := config.Load("n.yaml", []byte("version: 1\nservers:\n  s:\n    command: [s]\n    tools:\n      rules:\n        - tool: a\n          when: '"+expr+"'\n          action: allow\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Compile(c)
		if err == nil || !strings.Contains(err.Error(), "n.yaml:8:17: servers.s.tools.rules[0].when: must be a bool expression") {
			t.Errorf("%s: error = %v, want not bool at 8:17", expr, err)
		}
	}
}

// TestCompileInCode: a config built in code (no file, no positions) that
// skipped config.Validate still gets its globs and actions checked, since a
// malformed deny glob would otherwise match nothing.
func TestCompileInCode(t *testing.T) {
	c := &config.Config{
		Servers: []*config.Server{{Name: "s", Tools: config.Tools{
			Deny:    []string{"ok", "[a"},
			Default: "maybe",
			Rules:   []config.Rule{{Tool: "x", Action: "permit"}, {Tool: "", Action: config.ActionDeny, When: "true"}},
		}}},
		Clients: []config.Client{{Name: "c", Tools: config.ClientTools{Allow: []string{"s/["}}}},
	}
	_, err := Compile(c)
	want := strings.Join([]string{
		`servers.s.tools.deny[1]: invalid tool pattern "[a"`,
		`servers.s.tools.default: invalid action "maybe"`,
		`servers.s.tools.rules[0].action: invalid action "permit"`,
		`servers.s.tools.rules[1].tool: empty tool pattern`,
		`clients[0].tools.allow[0]: invalid tool pattern "s/["`,
	}, "\n")
	if err == nil {
		t.Fatal("Compile succeeded")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestCompileValid(t *testing.T) {
	c, err := config.Load("v.yaml", []byte("version: 1\nservers:\n  s:\n    command: [s]\n    tools:\n      rules:\n        - {tool: a, when: \"has(args.x) && args.x.size() > 2 && 'k' in annotations\", action: allow}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(c); err != nil {
		t.Errorf("Compile: %v", err)
	}
}
