package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sync"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/oauth"
)

// This file wires package oauth downstream: with listen.http.oauth the
// HTTP endpoint is an OAuth protected resource and admits JWT access
// tokens of the configured issuer, next to the static client tokens.

// jwtIdentityPrefix starts every JWT client's identity: no clients: name
// has a '.', so none can be taken over by a token's claim.
const jwtIdentityPrefix = "oidc."

var plainClaim = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`) })

// jwtIdentity is the client identity of a claim value: oidc.VALUE, or
// for a value that is no plain name (a directory of workspaces is named
// after it) oidc.= and a hash of it.
func jwtIdentity(v string) string {
	if plainClaim().MatchString(v) {
		return jwtIdentityPrefix + v
	}
	sum := sha256.Sum256([]byte(v))
	return jwtIdentityPrefix + "=" + hex.EncodeToString(sum[:12])
}

// jwtClients sets up hopts for listen.http.oauth, if configured.
func jwtClients(hopts *gateway.HTTPOptions, c *config.Config) error {
	o := c.Listen.HTTP.OAuth
	if o == nil {
		return nil
	}
	v, err := oauth.NewValidator(oauth.ValidatorOptions{Issuer: o.Issuer, Audience: o.Resource, IdentityClaim: o.EffectiveIdentityClaim(), GenericType: o.GenericTyp})
	if err != nil {
		return fmt.Errorf("listen.http.oauth: %w", err)
	}
	hopts.Verify = func(ctx context.Context, token string) (string, error) {
		id, err := v.Validate(ctx, token)
		if err != nil {
			return "", err
		}
		return jwtIdentity(id.Name), nil
	}
	hopts.ResourceMetadataURL = oauth.MetadataURL(o.Resource)
	meta := oauth.MetadataHandler(oauth.ResourceMetadata{Resource: o.Resource, AuthorizationServers: []string{o.Issuer}, ScopesSupported: o.ScopesSupported})
	hopts.Extra = map[string]http.Handler{"/.well-known/oauth-protected-resource": meta}
	if p := oauth.MetadataPath(o.Resource); p != "/.well-known/oauth-protected-resource" {
		hopts.Extra[p] = meta
	}
	return nil
}

// loopbackAddr reports whether HOST:PORT names a loopback host.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && (host == "localhost" || (ip != nil && ip.IsLoopback()))
}
