package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultRefreshMargin is how long before expiry Transport refreshes a
// token when Transport.RefreshMargin is zero.
const DefaultRefreshMargin = time.Minute

// AuthorizeFunc obtains a new grant for the transport's server and saves
// it in the store, typically by running Login with the challenge. step
// reports a step-up (403 insufficient_scope): ch.Scope is the scope
// needed, and the hook should ask for it together with the held scope.
type AuthorizeFunc func(ctx context.Context, ch Challenge, step bool) error

// Transport is an http.RoundTripper for one remote MCP server. It adds
// the stored access token to requests for that server, and to nothing
// else, refreshes the token shortly before it expires (and once on a 401
// with a stored token), and answers a 401 or a 403 insufficient_scope
// with Authorize, if set, or with an *AuthRequiredError.
//
// A request is sent again only if its body can be replayed (GetBody),
// and at most twice more: once after a refresh, once after Authorize. A
// server that keeps asking for more scope gets its last answer passed
// on, not a loop. Authorize runs under the transport's lock: concurrent
// requests wait for the one login instead of starting their own.
type Transport struct {
	// Server is the MCP server URL; requests to its origin whose path is
	// at or under its path get the token.
	Server string
	// SameOrigin widens the requests that get the token to every URL of
	// Server's scheme and host: the legacy HTTP+SSE transport posts to an
	// endpoint its server names beside the SSE URL. The caller keeps the
	// connection on that origin.
	SameOrigin bool
	// Store holds the grant, looked up by Server.
	Store Store
	// Base makes the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// HTTPClient makes refresh requests; nil means a default client.
	HTTPClient *http.Client
	// Authorize, if set, is called on a 401 with no usable token and on
	// a 403 insufficient_scope.
	Authorize AuthorizeFunc
	// RefreshMargin: refresh this long before expiry; zero means
	// DefaultRefreshMargin.
	RefreshMargin time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex // serializes refresh and authorization
}

func (t *Transport) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// covers reports whether u is the bound server or under it: the same
// scheme and host, and a path at or under the server's path.
func (t *Transport) covers(u *url.URL) bool {
	if t.SameOrigin {
		s, err := url.Parse(t.Server)
		return err == nil && s.Scheme == u.Scheme && s.Host == u.Host
	}
	return resourceCovers(t.Server, u.String())
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.covers(req.URL) {
		return t.base().RoundTrip(req) // never a token for another host or path
	}
	ctx := req.Context()
	g, err := t.grant(ctx, false)
	var cause error // why the stored grant is not used, for the error
	var oe *oauthError
	switch {
	case err == nil:
	case errors.Is(err, ErrNoToken):
		cause = err
	case errors.As(err, &oe):
		// The server refused the refresh (expired or revoked refresh
		// token): authorize anew, as if there were no grant.
		g, cause = nil, err
	default:
		return nil, err
	}
	resp, err := t.send(req, g)
	if err != nil {
		return nil, err
	}
	ch, _ := ParseChallenge(resp.Header)
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
	case resp.StatusCode == http.StatusForbidden && ch.Error == "insufficient_scope":
	default:
		return resp, nil
	}
	step := resp.StatusCode == http.StatusForbidden
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // cannot replay: the caller sees the answer
	}
	drain(resp)

	// A 401 with a refresh token: try a refresh first.
	if !step && g != nil && g.RefreshToken != "" {
		if ng, err := t.grant(ctx, true); err == nil {
			if resp, err = t.retry(req, ng); err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusUnauthorized {
				return resp, nil
			}
			ch, _ = ParseChallenge(resp.Header)
			drain(resp)
		}
	}
	if t.Authorize == nil {
		return nil, &AuthRequiredError{Resource: t.Server, Challenge: ch, StepUp: step, Err: cause}
	}
	if step && g != nil {
		ch.Scope = unionScope(g.Scope, ch.Scope)
	}
	t.mu.Lock()
	err = t.Authorize(ctx, ch, step)
	t.mu.Unlock()
	if err != nil {
		return nil, &AuthRequiredError{Resource: t.Server, Challenge: ch, StepUp: step, Err: err}
	}
	ng, err := t.grant(ctx, false)
	if err != nil {
		return nil, &AuthRequiredError{Resource: t.Server, Challenge: ch, StepUp: step, Err: err}
	}
	return t.retry(req, ng)
}

func (t *Transport) retry(req *http.Request, g *Grant) (*http.Response, error) {
	r := req
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("replaying request to %s: %w", t.Server, err)
		}
		r = req.Clone(req.Context())
		r.Body = body
	}
	return t.send(r, g)
}

// send clones req with the grant's token (none if g is nil) and sends it.
func (t *Transport) send(req *http.Request, g *Grant) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Del("Authorization")
	if g != nil {
		r.Header.Set("Authorization", "Bearer "+g.AccessToken)
	}
	return t.base().RoundTrip(r)
}

// grant loads the grant, checks it is bound to this transport's
// resource, and refreshes it when it is due (or when force is set and it
// has a refresh token), saving the result.
func (t *Transport) grant(ctx context.Context, force bool) (*Grant, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, err := t.Store.Load(ctx, t.Server)
	if err != nil {
		return nil, err
	}
	if g.Server != t.Server || !resourceCovers(g.Resource, t.Server) {
		return nil, fmt.Errorf("grant for %s is bound to %s: %w", t.Server, g.Resource, ErrTokenCorrupt)
	}
	margin := t.RefreshMargin
	if margin <= 0 {
		margin = DefaultRefreshMargin
	}
	due := !g.Expiry.IsZero() && t.now().Add(margin).After(g.Expiry)
	if (!due && !force) || g.RefreshToken == "" {
		if due {
			return nil, fmt.Errorf("token for %s expired and cannot be refreshed: %w", t.Server, ErrNoToken)
		}
		return g, nil
	}
	if err := Refresh(ctx, t.HTTPClient, g); err != nil {
		return nil, err
	}
	if err := t.Store.Save(ctx, g); err != nil {
		return nil, err
	}
	return g, nil
}

func unionScope(held, need string) string {
	out := strings.Fields(held)
	for _, s := range strings.Fields(need) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
