package gateway

import (
	"path"
	"strings"
	"testing"
)

// TestMatchTool: on names without "/", MatchTool agrees with path.Match
// for every pattern; with "/", '*', '?' and classes match it as an
// ordinary character (a range crossing '/' included).
func TestMatchTool(t *testing.T) {
	globs := []string{"*", "?", "a*", "*b", "a*b", "a?c", "[abc]x", "[^abc]x", "[a-c]*", "[!-/]", "\\*", "a\\?b", "*.*", "**", "[\\]]", "[é-ü]", "", "a[", "[]a]", "[a-]"}
	names := []string{"", "a", "b", "ab", "abc", "axb", "ax", "dx", "*", "a?b", "x.y", "]", "é", "ñ", "-", "!"}
	for _, g := range globs {
		for _, n := range names {
			want, err := path.Match(g, n)
			if err != nil {
				want = false
			}
			if got := MatchTool(g, n); got != want {
				t.Errorf("MatchTool(%q, %q) = %v, path.Match says %v", g, n, got, want)
			}
		}
	}
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"*", "files/read", true},
		{"fs_*", "fs_a/b", true},
		{"write*", "write/file", true},
		{"a?b", "a/b", true},
		{"files[!-/]read", "files/read", true},
		{"files[ -~]read", "files/read", true},
		{"*[!-/]*", "a/b", true},
		{"files[^/]read", "files/read", false},
		{"read", "files/read", false},
		{"*/read", "files/read", true},
		{strings.Repeat("*a", 10), strings.Repeat("a", 30) + "b", false}, // bounded backtracking
	} {
		if got := MatchTool(tc.glob, tc.name); got != tc.want {
			t.Errorf("MatchTool(%q, %q) = %v, want %v", tc.glob, tc.name, got, tc.want)
		}
	}
}
