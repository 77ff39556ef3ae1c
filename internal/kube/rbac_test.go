package kube_test

import (
	"slices"
	"strings"
	"testing"

	"mcpbox/internal/kube"
)

// TestRulesSecrets: the Role reads no Secret unless the config names
// some, and then only those, by name, sorted and once each; no rule has
// a wildcard.
func TestRulesSecrets(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []string // resourceNames of the get rule; nil: no such rule
	}{
		{nil, nil},
		{[]string{"gh", "db", "gh"}, []string{"db", "gh"}},
	} {
		var got []string
		found := false
		for _, r := range kube.Rules(tc.names...) {
			for _, f := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
				if slices.Contains(f, "*") {
					t.Errorf("rule %+v has a wildcard", r)
				}
			}
			if slices.Contains(r.Resources, "secrets") && slices.Contains(r.Verbs, "get") {
				if found || len(r.Resources) != 1 || len(r.Verbs) != 1 || len(r.ResourceNames) == 0 {
					t.Errorf("secret get rule %+v: want one rule, secrets only, get only, by name", r)
				}
				found, got = true, r.ResourceNames
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Rules(%q): get secrets %q, want %q", tc.names, got, tc.want)
		}
	}
	y, err := kube.RBAC("mcp", "system:serviceaccount:mcp:mcpbox", "gh-token")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "resourceNames:\n      - gh-token\n") {
		t.Errorf("RBAC YAML lacks the Secret's name:\n%s", y)
	}
}
