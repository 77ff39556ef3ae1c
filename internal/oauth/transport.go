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
// on, not a loop. Refreshes and Authorize run under the transport's lock
// and, with a Locker store, the grant's: concurrent requests, of this
// transport, of other connections and of other processes, wait for the
// one refresh or login and take its token instead of starting their own.
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
	g, err := t.grant(ctx, "")
	var cause error // why the stored grant is not used, for the error
	refused := ""   // the access token the server refused, or held back
	var oe *oauthError
	switch {
	case err == nil:
	case errors.Is(err, ErrNoToken):
		cause = err
	case errors.As(err, &oe):
		// The server refused the refresh (expired or revoked refresh
		// token): authorize anew, as if there were no grant. Its access
		// token counts as refused: authorize must not take it for one
		// another connection got meanwhile.
		g, cause = nil, err
		if sg, lerr := t.load(ctx); lerr == nil {
			refused = sg.AccessToken
		}
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

	if g != nil {
		refused = g.AccessToken
	}
	// A 401 with a refresh token: try a refresh first.
	if !step && g != nil && g.RefreshToken != "" {
		if ng, err := t.grant(ctx, g.AccessToken); err == nil {
			refused = ng.AccessToken
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
	ng, err := t.authorize(ctx, ch, step, refused)
	if err != nil {
		return nil, &AuthRequiredError{Resource: t.Server, Challenge: ch, StepUp: step, Err: err}
	}
	return t.retry(req, ng)
}

// authorize runs Authorize under the transport's lock and the store's
// (Locker), unless another connection or process authorized meanwhile:
// a usable grant whose access token is not the refused one (and, for a
// step-up, holds the scope asked for) is taken as it is. Without that,
// connections refused together each logged in anew, each registering a
// client of its own.
func (t *Transport) authorize(ctx context.Context, ch Challenge, step bool, refused string) (*Grant, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.Store.(Locker); ok {
		unlock, err := l.LockGrant(ctx, t.Server)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	if g, err := t.usable(t.load(ctx)); err == nil && g.AccessToken != refused && (!step || holds(g.Scope, ch.Scope)) {
		return g, nil
	}
	if err := t.Authorize(context.WithValue(ctx, grantLocked{}, t.Server), ch, step); err != nil {
		return nil, err
	}
	return t.usable(t.load(ctx))
}

// grantLocked is the context key under which authorize tells Login that
// the grant of the server (the value) is locked already: a second flock
// of it, on another file description, would wait for the first.
type grantLocked struct{}

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
// resource, and refreshes it when it is due or when its access token is
// stale (one the server refused; "": none), saving the result. The
// refresh runs under the store's lock (Locker), on the grant as it is
// then: another connection or process may have refreshed it already.
func (t *Transport) grant(ctx context.Context, stale string) (*Grant, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, err := t.load(ctx)
	if err != nil || !t.refreshing(g, stale) {
		return t.usable(g, err)
	}
	if l, ok := t.Store.(Locker); ok {
		unlock, err := l.LockGrant(ctx, t.Server)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if g, err = t.load(ctx); err != nil || !t.refreshing(g, stale) {
			return t.usable(g, err)
		}
	}
	spent := g.RefreshToken
	if err := Refresh(ctx, t.HTTPClient, g); err != nil {
		// Refused: the store may hold the successor of a refresh token
		// that a holder of the grant outside the lock spent.
		var oe *oauthError
		if errors.As(err, &oe) {
			ng, lerr := t.load(ctx)
			if lerr == nil && ng.RefreshToken != spent && !t.refreshing(ng, stale) {
				return ng, nil
			}
			if lerr == nil && ng.RefreshToken == spent && oe.Code == "invalid_grant" {
				// Dead (revoked, expired, spent elsewhere): kept, it read as
				// "refreshed at next use" in mcpbox login --status. The
				// access token stays for its own expiry.
				ng.RefreshToken = ""
				if serr := t.Store.Save(ctx, ng); serr != nil {
					return nil, errors.Join(err, serr)
				}
			}
		}
		return nil, err
	}
	if err := t.Store.Save(ctx, g); err != nil {
		return nil, err
	}
	return g, nil
}

// load loads the grant and checks it is bound to this transport's
// resource.
func (t *Transport) load(ctx context.Context) (*Grant, error) {
	g, err := t.Store.Load(ctx, t.Server)
	if err != nil {
		return nil, err
	}
	if g.Server != t.Server || !resourceCovers(g.Resource, t.Server) {
		return nil, fmt.Errorf("grant for %s is bound to %s: %w", t.Server, g.Resource, ErrTokenCorrupt)
	}
	return g, nil
}

// refreshing says whether g is to be refreshed: it has a refresh token,
// and its access token is stale or due.
func (t *Transport) refreshing(g *Grant, stale string) bool {
	return g.RefreshToken != "" && ((stale != "" && g.AccessToken == stale) || t.due(g))
}

// usable returns g unless its access token has expired (one that is due
// but not expired, with no refresh token, is still sent).
func (t *Transport) usable(g *Grant, err error) (*Grant, error) {
	if err != nil {
		return nil, err
	}
	if !g.Expiry.IsZero() && !t.now().Before(g.Expiry) {
		return nil, fmt.Errorf("token for %s expired and cannot be refreshed: %w", t.Server, ErrNoToken)
	}
	return g, nil
}

// due says whether g's access token is within the refresh margin of its
// expiry. The margin is RefreshMargin (DefaultRefreshMargin), but at
// most half the token's lifetime, so that a token of a minute or less is
// not refreshed on every request.
func (t *Transport) due(g *Grant) bool {
	if g.Expiry.IsZero() {
		return false
	}
	margin := t.RefreshMargin
	if margin <= 0 {
		margin = DefaultRefreshMargin
	}
	if !g.Issued.IsZero() && g.Expiry.After(g.Issued) {
		margin = min(margin, g.Expiry.Sub(g.Issued)/2)
	}
	return t.now().Add(margin).After(g.Expiry)
}

// holds says whether the scope held has every scope of need.
func holds(held, need string) bool {
	h := strings.Fields(held)
	for _, s := range strings.Fields(need) {
		if !slices.Contains(h, s) {
			return false
		}
	}
	return true
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
