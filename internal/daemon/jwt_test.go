package daemon

import (
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
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

// TestLocalTokenOnlyOnLoopbackWithJWT: with listen.http.oauth and no
// clients, the local token guards a loopback address (next to the JWTs)
// but is not made for one other hosts can reach.
func TestLocalTokenOnlyOnLoopbackWithJWT(t *testing.T) {
	c := &config.Config{Listen: config.Listen{HTTP: config.HTTP{OAuth: &config.HTTPOAuth{Issuer: "https://idp.example.com", Resource: "https://gw.example.com/mcp"}}}}
	for addr, wantLocal := range map[string]bool{"127.0.0.1:0": true, "0.0.0.0:8443": false} {
		var h gateway.HTTPOptions
		if err := jwtClients(&h, c); err != nil {
			t.Fatal(err)
		}
		tok, err := localToken(&h, t.TempDir(), addr, false, &redact.Book{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (tok != "") != wantLocal || (len(h.Clients) > 0) != wantLocal {
			t.Errorf("%s: local token %v, clients %d; want local token %v", addr, tok != "", len(h.Clients), wantLocal)
		}
		if h.Verify == nil || h.ResourceMetadataURL != "https://gw.example.com/.well-known/oauth-protected-resource/mcp" || h.Extra["/.well-known/oauth-protected-resource/mcp"] == nil {
			t.Errorf("%s: JWT options not set: %+v", addr, h)
		}
	}
}
