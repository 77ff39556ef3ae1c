package config

import (
	"reflect"
	"strings"
	"testing"
)

const remoteBase = "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/mcp\n"

func TestOAuthParsesAndRoundTrips(t *testing.T) {
	in := remoteBase + `    oauth:
      client_id: {from: env:CID}
      client_secret: {from: "cmd:pass linear/secret"}
      client_metadata_url: https://example.com/mcpbox-client.json
      scopes: [read, write]
      step_up_scopes: [admin]
      issuer: https://auth.example.com
      redirect_port: 8765
  e:
    url: https://other.example.com/mcp
    oauth: {}
oauth:
  store_key: {from: "cmd:pass mcpbox/oauth-key"}
listen:
  http:
    addr: 0.0.0.0:8443
    tls: {cert: c.pem, key: k.pem}
    oauth:
      issuer: https://idp.example.com/realms/team
      resource: https://gateway.example.com/mcp
      identity_claim: email
      scopes_supported: [mcp]
      generic_typ: true
`
	c, err := Load("t.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Server("r").OAuth
	want := ServerOAuth{ClientID: Token{From: "env:CID"}, ClientSecret: Token{From: "cmd:pass linear/secret"},
		ClientMetadataURL: "https://example.com/mcpbox-client.json", Scopes: []string{"read", "write"},
		StepUpScopes: []string{"admin"}, Issuer: "https://auth.example.com", RedirectPort: 8765}
	if o == nil || o.ClientID.From != want.ClientID.From || o.ClientSecret.From != want.ClientSecret.From ||
		o.ClientMetadataURL != want.ClientMetadataURL || !reflect.DeepEqual(o.Scopes, want.Scopes) || !reflect.DeepEqual(o.StepUpScopes, want.StepUpScopes) ||
		o.Issuer != want.Issuer || o.RedirectPort != want.RedirectPort {
		t.Fatalf("servers.r.oauth = %+v", o)
	}
	if e := c.Server("e").OAuth; e == nil || e.Issuer != "" {
		t.Fatalf("oauth: {} gave %+v, want a non-nil empty mapping", e)
	}
	if c.OAuth.StoreKey.From != "cmd:pass mcpbox/oauth-key" {
		t.Errorf("oauth.store_key = %q", c.OAuth.StoreKey.From)
	}
	h := c.Listen.HTTP.OAuth
	if h == nil || h.Issuer != "https://idp.example.com/realms/team" || h.Resource != "https://gateway.example.com/mcp" ||
		h.EffectiveIdentityClaim() != "email" || !reflect.DeepEqual(h.ScopesSupported, []string{"mcp"}) || !h.GenericTyp {
		t.Fatalf("listen.http.oauth = %+v", h)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Load("t.yaml", out)
	if err != nil {
		t.Fatalf("marshalled config does not load: %v\n%s", err, out)
	}
	if c2.Server("e").OAuth == nil || c2.Server("r").OAuth.RedirectPort != 8765 || c2.Listen.HTTP.OAuth.IdentityClaim != "email" || !c2.Listen.HTTP.OAuth.GenericTyp ||
		c2.OAuth.StoreKey.From != c.OAuth.StoreKey.From || c2.Server("r").OAuth.ClientSecret.From != want.ClientSecret.From {
		t.Errorf("round trip lost oauth settings:\n%s", out)
	}
	if !strings.Contains(string(out), "oauth: {}") {
		t.Errorf("empty oauth mapping not kept:\n%s", out)
	}
}

func TestOAuthInvalid(t *testing.T) {
	listen := func(o string) string {
		return remoteBase + "listen:\n  http:\n    oauth: " + o + "\n"
	}
	tests := []struct{ name, yaml, want string }{
		{"on a local server", base + "    oauth: {}\n", `t.yaml:5:12: servers.s.oauth: only a remote server (url) takes oauth`},
		{"pasted client id", remoteBase + "    oauth: {client_id: abc}\n", `t.yaml:5:24: servers.r.oauth.client_id: expected a mapping such as {from: env:VAR}`},
		{"bad client id ref", remoteBase + "    oauth: {client_id: {from: vault:x}}\n", `t.yaml:5:31: servers.r.oauth.client_id.from: must be a reference`},
		{"empty client id ref", remoteBase + "    oauth: {client_id: {}}\n", `t.yaml:5:24: servers.r.oauth.client_id.from: missing reference`},
		{"secret without id", remoteBase + "    oauth: {client_secret: {from: env:S}}\n", `t.yaml:5:28: servers.r.oauth.client_secret: needs client_id`},
		{"http metadata url", remoteBase + "    oauth: {client_metadata_url: http://example.com/c.json}\n", `t.yaml:5:34: servers.r.oauth.client_metadata_url: want an https URL with a path`},
		{"metadata url no path", remoteBase + "    oauth: {client_metadata_url: https://example.com}\n", `t.yaml:5:34: servers.r.oauth.client_metadata_url: want an https URL with a path`},
		{"secret without issuer", remoteBase + "    oauth: {client_id: {from: env:C}, client_secret: {from: env:S}}\n", `t.yaml:5:54: servers.r.oauth.client_secret: needs issuer (the authorization server the client is registered at`},
		{"bad step-up scope", remoteBase + "    oauth: {step_up_scopes: [\"a\\\\b\"]}\n", `t.yaml:5:30: servers.r.oauth.step_up_scopes[0]: invalid scope`},
		{"bad scope", remoteBase + "    oauth: {scopes: [read, \"a b\"]}\n", `t.yaml:5:28: servers.r.oauth.scopes[1]: invalid scope "a b"`},
		{"http issuer", remoteBase + "    oauth: {issuer: http://auth.example.com}\n", `t.yaml:5:21: servers.r.oauth.issuer: plain http is only allowed to a loopback host`},
		{"bad port", remoteBase + "    oauth: {redirect_port: 70000}\n", `t.yaml:5:28: servers.r.oauth.redirect_port: 70000 is not a port`},
		{"unknown key", remoteBase + "    oauth: {scope: [x]}\n", `t.yaml:5:13: unknown key "scope" in servers.r.oauth; did you mean "scopes"?`},
		{"authorization header too", remoteBase + "    headers: {Authorization: {from: env:T}}\n    oauth: {}\n", `t.yaml:6:12: servers.r.oauth: a server with oauth gets its Authorization header from the login`},
		{"store key pasted", remoteBase + "oauth: {store_key: s3cr3t}\n", `t.yaml:5:20: oauth.store_key: expected a mapping such as {from: env:VAR}`},
		{"listen no issuer", listen("{resource: https://gw.example.com/mcp}"), `t.yaml:7:12: listen.http.oauth.issuer: missing`},
		{"listen no resource", listen("{issuer: https://idp.example.com}"), `t.yaml:7:12: listen.http.oauth.resource: missing`},
		{"listen http issuer", listen("{issuer: http://idp.example.com, resource: https://gw.example.com/mcp}"), `t.yaml:7:21: listen.http.oauth.issuer: plain http is only allowed to a loopback host`},
		{"listen resource fragment", listen("{issuer: https://idp.example.com, resource: \"https://gw.example.com/mcp#x\"}"), `t.yaml:7:56: listen.http.oauth.resource: must have no query or fragment`},
		{"shared login, JWT users", remoteBase + "    scope: shared\n    oauth: {}\nlisten:\n  http:\n    oauth: {issuer: https://idp.example.com, resource: https://gw.example.com/mcp}\n", `t.yaml:5:12: servers.r.scope: shared with oauth on a gateway of several clients would use one login for all`},
		{"shared login, clients", remoteBase + "    scope: shared\n    oauth: {}\nclients:\n  - {name: a, token: {from: env:A}}\n", `t.yaml:5:12: servers.r.scope: shared with oauth on a gateway of several clients`},
		{"listen bad claim", listen("{issuer: https://idp.example.com, resource: https://gw.example.com/mcp, identity_claim: \"a b\"}"), `t.yaml:7:100: listen.http.oauth.identity_claim: invalid claim name "a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Load succeeded, want %q", tt.want)
			}
			es := AsErrors(err)
			if len(es) == 0 || !strings.HasPrefix(es[0].Error(), tt.want) {
				t.Errorf("first error:\n got %v\nwant prefix %s", err, tt.want)
			}
		})
	}
}

// TestOAuthAllowsNonLoopbackListen: JWT clients count as authenticated
// clients for a non-loopback listen address.
func TestOAuthAllowsNonLoopbackListen(t *testing.T) {
	y := remoteBase + "listen:\n  http:\n    addr: 0.0.0.0:8443\n"
	if _, err := Load("t.yaml", []byte(y)); err == nil {
		t.Fatal("non-loopback listen without clients accepted")
	}
	y += "    oauth: {issuer: https://idp.example.com, resource: https://gw.example.com/mcp}\n"
	if _, err := Load("t.yaml", []byte(y)); err != nil {
		t.Fatalf("non-loopback listen with listen.http.oauth refused: %v", err)
	}
}

// TestOAuthSharedForOneUser: scope shared with oauth stays allowed where
// the gateway has one user (no clients, no JWT users).
func TestOAuthSharedForOneUser(t *testing.T) {
	if _, err := Load("t.yaml", []byte(remoteBase+"    scope: shared\n    oauth: {}\n")); err != nil {
		t.Fatal(err)
	}
}
