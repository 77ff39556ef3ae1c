package textdiff

import (
	"strings"
	"testing"
)

// apply rebuilds both sides from an edit script.
func apply(ops []Op) (a, b []string) {
	for _, o := range ops {
		if o.Kind != '+' {
			a = append(a, o.Text)
		}
		if o.Kind != '-' {
			b = append(b, o.Text)
		}
	}
	return a, b
}

func TestLines(t *testing.T) {
	tests := []struct {
		a, b string
		kept int // lines a longest common subsequence keeps
	}{
		{"", "", 0},
		{"x", "", 0},
		{"a b c", "a b c", 3},
		{"a b c d", "a x c d", 3},
		{"a b c d e", "b c e f", 3},
		{"p q r s", "s r q p", 1},
	}
	for _, tt := range tests {
		a, b := strings.Fields(tt.a), strings.Fields(tt.b)
		for _, cells := range []int{1 << 20, 0} {
			ops := Lines(a, b, cells)
			ga, gb := apply(ops)
			if strings.Join(ga, " ") != tt.a || strings.Join(gb, " ") != tt.b {
				t.Errorf("Lines(%q, %q, %d) rebuilds %q, %q", tt.a, tt.b, cells, ga, gb)
			}
			kept := 0
			for _, o := range ops {
				if o.Kind == ' ' {
					kept++
				}
			}
			// Without a table only the common prefix and suffix are kept.
			if cells > 0 && kept != tt.kept {
				t.Errorf("Lines(%q, %q) keeps %d lines, want %d", tt.a, tt.b, kept, tt.kept)
			}
		}
	}
}

// FuzzLines: any two texts are rebuilt from their script.
func FuzzLines(f *testing.F) {
	f.Add("a\nb\nc", "a\nc\nd")
	f.Fuzz(func(t *testing.T, x, y string) {
		a, b := strings.Split(x, "\n"), strings.Split(y, "\n")
		ga, gb := apply(Lines(a, b, 1<<12))
		if strings.Join(ga, "\n") != x || strings.Join(gb, "\n") != y {
			t.Fatalf("not rebuilt: %q %q", ga, gb)
		}
	})
}
