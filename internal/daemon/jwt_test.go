package daemon

import (
	"strings"
	"testing"
)

// TestJWTIdentity: a claim becomes an identity no clients: name can be
// (it has a '.'), and a value that is no plain name (a path, a colon, a
// long string) becomes a hash, never a directory name of its own making.
func TestJWTIdentity(t *testing.T) {
	for in, want := range map[string]string{
		"alice":             "oidc.alice",
		"alice@example.com": "oidc.alice@example.com",
		"auth0+123":         "oidc.auth0+123",
	} {
		if got := jwtIdentity(in); got != want {
			t.Errorf("jwtIdentity(%q) = %q, want %q", in, got, want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"../../etc", "a/b", "a:b", ".hidden", "", "x y", strings.Repeat("a", 129), "auth0|123"} {
		got := jwtIdentity(in)
		if !strings.HasPrefix(got, "oidc.=") || strings.ContainsAny(got, "/:| ") || len(got) > 40 {
			t.Errorf("jwtIdentity(%q) = %q, want oidc.= and a hash", in, got)
		}
		if o, ok := seen[got]; ok {
			t.Errorf("%q and %q both map to %q", in, o, got)
		}
		seen[got] = in
	}
}
