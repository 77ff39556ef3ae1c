package builtin

import "testing"

func TestLineMatchCrossesSlashes(t *testing.T) {
	p := CommandPolicy{Allow: []string{"git", "cat *"}, Deny: []string{"git *push*"}}
	tests := []struct {
		argv []string
		want verdict
	}{
		{[]string{"git", "push", "origin", "feature/x"}, refused},
		{[]string{"git", "-C", "sub/dir", "push"}, refused},
		{[]string{"git", "log", "--oneline"}, allowed},
		{[]string{"cat", "src/main.go"}, allowed},
		{[]string{"/workspace/input/evil/git", "log"}, refused}, // not the system's git
		{[]string{"/usr/bin/git", "log"}, allowed},
		{[]string{"/usr/bin/../../workspace/input/git", "log"}, refused},
	}
	for _, tt := range tests {
		if got, rule := p.check(tt.argv); got != tt.want {
			t.Errorf("%q: verdict %v (rule %q), want %v", tt.argv, got, rule, tt.want)
		}
	}
}
