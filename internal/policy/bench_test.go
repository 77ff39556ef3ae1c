package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkDecide100Rules: the call matches only the last of 100
// conditional rules, so every condition is evaluated.
func BenchmarkDecide100Rules(b *testing.B) {
	var y strings.Builder
	y.WriteString("version: 1\nservers:\n  s:\n    command: [s]\n    tools:\n      rules:\n")
	for i := range 100 {
		fmt.Fprintf(&y, "        - {tool: \"t*\", when: \"args.n == %d.0 && args.repo.startsWith('org/') && client != 'evil'\", action: allow}\n", i)
	}
	e := mustEngine(b, y.String())
	in := Input{Client: "c", Server: "s", Tool: "tool", Args: map[string]any{"n": 99.0, "repo": "org/x", "body": strings.Repeat("x", 1000)}}
	if d := e.Decide(in); !strings.Contains(d.Rule, "rules[99]") {
		b.Fatalf("Decide = %+v, want rules[99]", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Decide(in)
	}
}

func BenchmarkLimiterAllow(b *testing.B) {
	l, clk := newTestLimiter(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clk.advance(time.Second)
		l.Allow("client", "c", tools[i%len(tools)])
		i++
	}
}

var tools = []string{"a", "b", "c", "d", "e", "f", "g", "h"}
