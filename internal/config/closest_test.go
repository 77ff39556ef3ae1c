package config

import "testing"

// TestClosest: a typo gets the name it was meant as, a transposition
// counting as one edit; a short name two edits from a candidate, or a
// name far from every one, gets none.
func TestClosest(t *testing.T) {
	commands := []string{"serve", "run", "exec", "logs", "ps", "policy", "token", "login", "version", "snapshot"}
	for _, tc := range []struct{ name, want string }{
		{"serv", "serve"},
		{"sevre", "serve"},
		{"sreve", "serve"},
		{"lgos", "logs"},
		{"snapshto", "snapshot"},
		{"snpashto", "snapshot"}, // two edits in a long name
		{"bogus", ""},            // two edits from "logs"
		{"xyz", ""},
		{"ps", "ps"},
		{"", ""},
		{"s", ""}, // one edit from "ps", as any single letter is from many names
	} {
		if got := Closest(tc.name, commands); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"ab", "ba", 1}, {"abc", "ca", 3}, {"kitten", "sitting", 3}, {"memroy", "memory", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
