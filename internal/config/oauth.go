package config

import (
	"net/url"
	"strings"
)

// This file holds the OAuth settings: a remote server's oauth mapping
// (mcpbox as OAuth client), the top-level oauth mapping (where the tokens'
// key comes from) and listen.http.oauth (the gateway as protected resource).

// ServerOAuth turns OAuth on for a remote server (servers.NAME.oauth); its
// presence alone does, every key is optional.
type ServerOAuth struct {
	// ClientID and ClientSecret are a client pre-registered with the
	// authorization server, as secret references; zero: none.
	ClientID     Token
	ClientSecret Token
	// ClientMetadataURL is mcpbox's Client ID Metadata Document (https).
	ClientMetadataURL string
	// Scopes, if set, are asked for instead of the server's.
	Scopes []string
	// StepUpScopes are the scopes serve may add without a person when the
	// server asks for more (403 insufficient_scope); with Scopes and the
	// scope of the login, the bound of its silent re-authorization.
	StepUpScopes []string
	// Issuer pins the authorization server.
	Issuer string
	// RedirectPort fixes the loopback redirect's port; 0: any.
	RedirectPort int
	Meta         Meta
}

// OAuth is the top-level oauth mapping.
type OAuth struct {
	// StoreKey is where the key that seals the stored tokens comes from;
	// zero: STATE_DIR/oauth.key, made on first use.
	StoreKey Token
	Meta     Meta
}

// HTTPOAuth makes the HTTP endpoint accept JWT access tokens of one
// issuer (listen.http.oauth).
type HTTPOAuth struct {
	Issuer          string   // the authorization server; required
	Resource        string   // the gateway's resource URI, the tokens' aud; required
	IdentityClaim   string   // the claim naming the client; empty: sub
	ScopesSupported []string // advertised in the resource metadata
	// GenericTyp also accepts tokens typed JWT or untyped (issuers that do
	// not follow RFC 9068's at+jwt); false: typ must be at+jwt.
	GenericTyp bool
	Meta       Meta
}

func (d *decoder) ref(v *node, p string, t *Token) {
	if d.refMapping(v, p) {
		d.mapping(v, p, &t.Meta, []field{
			{"from", func(v *node, p string) { t.From = d.str(v, p) }},
		})
	}
}

func (d *decoder) serverOAuth(n *node, path string) *ServerOAuth {
	o := &ServerOAuth{}
	d.mapping(n, path, &o.Meta, []field{
		{"client_id", func(v *node, p string) { d.ref(v, p, &o.ClientID) }},
		{"client_secret", func(v *node, p string) { d.ref(v, p, &o.ClientSecret) }},
		{"client_metadata_url", func(v *node, p string) { o.ClientMetadataURL = d.str(v, p) }},
		{"scopes", func(v *node, p string) { o.Scopes = d.strs(v, p, &o.Meta, "scopes", d.str) }},
		{"step_up_scopes", func(v *node, p string) { o.StepUpScopes = d.strs(v, p, &o.Meta, "step_up_scopes", d.str) }},
		{"issuer", func(v *node, p string) { o.Issuer = d.str(v, p) }},
		{"redirect_port", func(v *node, p string) { o.RedirectPort = d.integer(v, p) }},
	})
	return o
}

func (d *decoder) oauth(n *node, path string, o *OAuth) {
	d.mapping(n, path, &o.Meta, []field{
		{"store_key", func(v *node, p string) { d.ref(v, p, &o.StoreKey) }},
	})
}

func (d *decoder) httpOAuth(n *node, path string) *HTTPOAuth {
	o := &HTTPOAuth{}
	d.mapping(n, path, &o.Meta, []field{
		{"issuer", func(v *node, p string) { o.Issuer = d.str(v, p) }},
		{"resource", func(v *node, p string) { o.Resource = d.str(v, p) }},
		{"identity_claim", func(v *node, p string) { o.IdentityClaim = d.str(v, p) }},
		{"scopes_supported", func(v *node, p string) { o.ScopesSupported = d.strs(v, p, &o.Meta, "scopes_supported", d.str) }},
		{"generic_typ", func(v *node, p string) { o.GenericTyp = d.boolean(v, p) }},
	})
	return o
}

// checkRef checks an optional secret reference at path.
func checkRef(r *collector, t *Token, parent *Meta, key, path string) {
	if !parent.Has(key) {
		return
	}
	if t.From == "" {
		r.errorf(firstPos(t.Meta.At("from"), parent.At(key)), "%s.from: missing reference (env:VAR, file:PATH or cmd:COMMAND)", path)
	} else if _, err := ParseSecretRef(t.From); err != nil {
		r.errorf(t.Meta.At("from"), "%s.from: %v", path, err)
	}
}

// checkServerOAuth checks servers.NAME.oauth.
func checkServerOAuth(r *collector, s *Server, p string) {
	o := s.OAuth
	if o == nil {
		return
	}
	p += ".oauth"
	if s.URL == "" && !s.Meta.Has("url") {
		r.errorf(s.Meta.At("oauth"), "%s: only a remote server (url) takes oauth", p)
	}
	for _, h := range s.Headers {
		if strings.EqualFold(h.Name, "Authorization") {
			r.errorf(s.Meta.At("oauth"), "%s: a server with oauth gets its Authorization header from the login; remove headers.%s", p, h.Name)
		}
	}
	checkRef(r, &o.ClientID, &o.Meta, "client_id", p+".client_id")
	checkRef(r, &o.ClientSecret, &o.Meta, "client_secret", p+".client_secret")
	if o.Meta.Has("client_secret") && !o.Meta.Has("client_id") {
		r.errorf(o.Meta.At("client_secret"), "%s.client_secret: needs client_id", p)
	}
	if o.ClientMetadataURL != "" || o.Meta.Has("client_metadata_url") {
		u, err := url.Parse(o.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" || u.User != nil || u.Fragment != "" {
			r.errorf(o.Meta.At("client_metadata_url"), "%s.client_metadata_url: want an https URL with a path (the Client ID Metadata Document)", p)
		}
	}
	for i, sc := range o.Scopes {
		if !validScope(sc) {
			r.errorf(o.Meta.Elem("scopes", i), "%s.scopes[%d]: invalid scope %q (printable ASCII, no spaces, quotes or backslashes)", p, i, sc)
		}
	}
	for i, sc := range o.StepUpScopes {
		if !validScope(sc) {
			r.errorf(o.Meta.Elem("step_up_scopes", i), "%s.step_up_scopes[%d]: invalid scope %q (printable ASCII, no spaces, quotes or backslashes)", p, i, sc)
		}
	}
	if o.Meta.Has("client_secret") && o.Issuer == "" && !o.Meta.Has("issuer") {
		// Without it the secret would go to whatever authorization
		// server the remote server names.
		r.errorf(o.Meta.At("client_secret"), "%s.client_secret: needs issuer (the authorization server the client is registered at; the secret is sent nowhere else)", p)
	}
	if o.Issuer != "" || o.Meta.Has("issuer") {
		if err := checkURL(o.Issuer); err != nil {
			r.errorf(o.Meta.At("issuer"), "%s.issuer: %v", p, err)
		}
	}
	if o.RedirectPort < 0 || o.RedirectPort > 65535 {
		r.errorf(o.Meta.At("redirect_port"), "%s.redirect_port: %d is not a port (want 0-65535; 0: any)", p, o.RedirectPort)
	}
}

// validScope: RFC 6749 §3.3 scope-token.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// checkOAuth checks the top-level oauth mapping and listen.http.oauth.
func checkOAuth(r *collector, c *Config) {
	checkRef(r, &c.OAuth.StoreKey, &c.OAuth.Meta, "store_key", "oauth.store_key")
	checkSharedLogins(r, c)
	o := c.Listen.HTTP.OAuth
	if o == nil {
		return
	}
	const p = "listen.http.oauth"
	if o.Issuer == "" {
		r.errorf(firstPos(o.Meta.At("issuer"), c.Listen.HTTP.Meta.At("oauth")), "%s.issuer: missing (the authorization server whose tokens are accepted)", p)
	} else if err := checkURL(o.Issuer); err != nil {
		r.errorf(o.Meta.At("issuer"), "%s.issuer: %v", p, err)
	}
	if o.Resource == "" {
		r.errorf(firstPos(o.Meta.At("resource"), c.Listen.HTTP.Meta.At("oauth")), "%s.resource: missing (the gateway's URL as clients reach it, e.g. https://gateway.example.com/mcp)", p)
	} else if err := checkURL(o.Resource); err != nil {
		r.errorf(o.Meta.At("resource"), "%s.resource: %v", p, err)
	} else if u, _ := url.Parse(o.Resource); u.Fragment != "" || u.RawQuery != "" {
		r.errorf(o.Meta.At("resource"), "%s.resource: must have no query or fragment (RFC 8707)", p)
	}
	if o.Meta.Has("identity_claim") && !claimRE().MatchString(o.IdentityClaim) {
		r.errorf(o.Meta.At("identity_claim"), "%s.identity_claim: invalid claim name %q", p, o.IdentityClaim)
	}
	for i, sc := range o.ScopesSupported {
		if !validScope(sc) {
			r.errorf(o.Meta.Elem("scopes_supported", i), "%s.scopes_supported[%d]: invalid scope %q", p, i, sc)
		}
	}
}

// checkSharedLogins refuses scope: shared for an oauth server of a gateway
// with several clients (clients, or JWT users): its one connection would
// carry one login, so every client would act as whoever logged in.
func checkSharedLogins(r *collector, c *Config) {
	if len(c.Clients) == 0 && c.Listen.HTTP.OAuth == nil {
		return
	}
	for _, s := range c.Servers {
		if s.OAuth != nil && s.Scope == ScopeShared {
			r.errorf(s.Meta.At("scope"), "servers.%s.scope: shared with oauth on a gateway of several clients would use one login for all of them; use scope agent (each client logs in: mcpbox login %s --client NAME)", s.Name, s.Name)
		}
	}
}

var claimRE = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_.:/-]{0,127}$`)

func serverOAuthNode(o *ServerOAuth) *node {
	m := mapNode()
	refNode(m, "client_id", &o.ClientID, &o.Meta)
	refNode(m, "client_secret", &o.ClientSecret, &o.Meta)
	addStr(m, "client_metadata_url", o.ClientMetadataURL)
	addStrs(m, "scopes", o.Scopes)
	addStrs(m, "step_up_scopes", o.StepUpScopes)
	addStr(m, "issuer", o.Issuer)
	addNonZeroInt(m, "redirect_port", o.RedirectPort)
	return flowIfEmpty(m)
}

func refNode(m *node, key string, t *Token, parent *Meta) {
	if t.From != "" || parent.Has(key) {
		e := mapNode()
		addStr(e, "from", t.From)
		addKV(m, key, flowIfEmpty(e))
	}
}

func oauthNode(o *OAuth) *node {
	m := mapNode()
	refNode(m, "store_key", &o.StoreKey, &o.Meta)
	return m
}

func httpOAuthNode(o *HTTPOAuth) *node {
	m := mapNode()
	addStr(m, "issuer", o.Issuer)
	addStr(m, "resource", o.Resource)
	addStr(m, "identity_claim", o.IdentityClaim)
	addStrs(m, "scopes_supported", o.ScopesSupported)
	addBool(m, "generic_typ", o.GenericTyp)
	return flowIfEmpty(m)
}

// EffectiveIdentityClaim is the claim naming a JWT client: sub by default.
func (o *HTTPOAuth) EffectiveIdentityClaim() string {
	if o.IdentityClaim == "" {
		return "sub"
	}
	return o.IdentityClaim
}
