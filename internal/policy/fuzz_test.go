package policy

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"mcpbox/internal/config"
)

// whenConfig is a config with one rule whose condition is expr, quoted on
// line whenLine (Go's escapes of a quoted string are YAML's too).
func whenConfig(expr string) string {
	q := strconv.Quote(expr)
	return "version: 1\nservers:\n  s:\n    command: [s]\n    tools:\n      rules:\n        - tool: t\n          when: " + q + "\n          action: approve\n      allow: [t]\n"
}

const whenLine = 8

// FuzzWhen compiles an arbitrary condition as a config would give it.
// Properties: compiling never panics; a refused condition is reported at
// file:line:col on the condition's own line, within it; an accepted one
// decides any call's arguments (never panicking) as allow or approve.
func FuzzWhen(f *testing.F) {
	for _, s := range []string{
		"true",
		"args.repo == 'x'",
		"args.labels.exists(l, l == 'prod')",
		"args.n > 3 && tool.startsWith('a')",
		"size(args.path) > 0",
		"args.x.y.z",
		"'é' + ",
		"1 +",
		"args.a.map(x, args.a.map(y, x + y)).size() > 0",
		"has(args.k) ? args.k : false",
		"annotations.destructiveHint == true",
		"args.s.matches('^(a+)+$')",
	} {
		f.Add(s, `{"repo":"x","n":4,"labels":["prod"],"a":[1,2],"k":true,"s":"aaaa"}`)
		f.Add(s, `{}`)
	}
	f.Fuzz(func(t *testing.T, expr, argsJSON string) {
		if !utf8.ValidString(expr) || strings.TrimSpace(expr) == "" {
			return // not representable in YAML; empty means no condition
		}
		src := whenConfig(expr)
		c, err := config.Load("p.yaml", []byte(src))
		if err != nil {
			t.Fatalf("config with the condition does not load: %v\n%s", err, src)
		}
		if c.Servers[0].Tools.Rules[0].When != expr {
			t.Fatalf("condition read back as %q", c.Servers[0].Tools.Rules[0].When)
		}
		e, err := CompileWith(c, Options{Source: []byte(src)})
		if err != nil {
			es, ok := err.(*Errors)
			if !ok || len(es.Problems) == 0 {
				t.Fatalf("Compile error is not an *Errors: %v", err)
			}
			lines := strings.Split(src, "\n")
			width := utf8.RuneCountInString(lines[whenLine-1])
			for _, p := range es.Problems {
				if p.File != "p.yaml" || p.Line != whenLine || p.Col < 1 || p.Col > width+1 {
					t.Fatalf("problem %q not within the condition (line %d, %d characters)", p, whenLine, width)
				}
				if !strings.HasPrefix(p.String(), "p.yaml:") {
					t.Fatalf("problem %q does not start with its file:line:col", p)
				}
			}
			return
		}
		dec := json.NewDecoder(strings.NewReader(argsJSON))
		dec.UseNumber()
		var args map[string]any
		if dec.Decode(&args) != nil {
			return
		}
		d := e.Decide(Input{Client: "c", Server: "s", Tool: "t", Args: args, Annotations: args})
		if d.Action != config.ActionAllow && d.Action != config.ActionApprove {
			t.Fatalf("Decide = %+v, want allow or approve", d)
		}
	})
}
