package gateway

import (
	"context"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// This file admits clients whose bearer token is checked by a function
// rather than compared with the configured ones: JWT access tokens of an
// OAuth issuer (HTTPOptions.Verify), with the resource metadata served
// next to the endpoint (HTTPOptions.Extra).

// requireAuth checks every request's bearer token: the clients' tokens
// first (constant time), then o.Verify. A refusal is a 401 with a
// WWW-Authenticate header naming o.ResourceMetadataURL, if set.
func (o HTTPOptions) requireAuth(g *Gateway, h http.Handler) http.Handler {
	cs := &clientSet{refresh: o.Refresh, log: g.log}
	cs.cur.Store(&o.Clients)
	verify := cs.verify
	if o.Verify != nil {
		verify = func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
			if len(o.Clients) > 0 {
				if ti, err := cs.verify(ctx, token, r); err == nil {
					return ti, nil
				}
			}
			name, err := o.Verify(ctx, token)
			if err != nil || !verifiedName(name) {
				// The reason stays here: the client only learns 401.
				g.log.Debug("bearer token refused", "err", err)
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: name}, nil
		}
	}
	// The middleware gets a challengeWriter, which it passes on to the
	// handler once the token checks out: the handler gets the real one.
	passed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cw, ok := w.(*challengeWriter); ok {
			w = cw.ResponseWriter
		}
		h.ServeHTTP(w, r)
	})
	mw := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		AllowMissingExpiration: true,
		ResourceMetadataURL:    o.ResourceMetadataURL,
	})(passed)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mw.ServeHTTP(&challengeWriter{ResponseWriter: w, r: r, metadata: o.ResourceMetadataURL}, r)
	})
}

// challengeWriter gives a 401 the challenge RFC 6750 (§3) asks for, which
// the go-sdk's middleware leaves out: "Bearer" always (it sent no
// WWW-Authenticate without resource metadata), error="invalid_token"
// when a token was sent and refused (a client then renews its token
// rather than asking its person again), and the resource metadata.
type challengeWriter struct {
	http.ResponseWriter
	r        *http.Request
	metadata string
}

func (c *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		var params []string
		if scheme, tok, ok := strings.Cut(c.r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) != "" {
			params = append(params, `error="invalid_token"`)
		}
		if c.metadata != "" {
			params = append(params, `resource_metadata="`+c.metadata+`"`)
		}
		v := "Bearer"
		if len(params) > 0 {
			v += " " + strings.Join(params, ", ")
		}
		c.Header().Set("WWW-Authenticate", v)
	}
	c.ResponseWriter.WriteHeader(code)
}

// verifiedName: an identity from Verify must be a name no client
// configured or internal can have (it contains a '.'), and safe as a
// directory name (workspaces are kept per identity).
func verifiedName(name string) bool {
	return strings.Contains(name, ".") && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".") &&
		!strings.ContainsAny(name, "/\\\x00:, ") && len(name) <= 200
}

// ClientMessage is an error whose ClientMessage is what the client should
// read when a request to a server fails with it (e.g. "server S needs
// authorization: run `mcpbox login S`"), however deeply a transport
// wrapped it.
type ClientMessage interface {
	error
	ClientMessage() string
}
