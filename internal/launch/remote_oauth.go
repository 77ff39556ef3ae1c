package launch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"mcpbox/internal/gateway"
	"mcpbox/internal/oauth"
	"mcpbox/internal/redact"
)

// RemoteOAuth makes a remote server's connections carry the OAuth access
// token of a login (mcpbox login), refreshed before it expires.
type RemoteOAuth struct {
	// Name is the server's name, for the error that asks for a login.
	Name string
	// LoginFlags, if set, gives what follows `mcpbox login NAME` in
	// that error for the client identity agent ("": the shared scope),
	// so that its login reaches this gateway's config and state dir and
	// that identity's token store (" --config PATH --client NAME").
	LoginFlags func(agent string) string
	// Store returns the grant store of a client identity (the scope's
	// agent; "" for the shared scope): one store per identity, so that one
	// client's token is never sent for another.
	Store func(agent string) (oauth.Store, error)
	// Reauthorize, if set, gets a new grant into store without a person
	// (a silent login, oauth.LoginOptions.Silent) when the server asks
	// for more scope (step is set; ch.Scope is the held scope and the one
	// asked for) or refuses a stored token (e.g. its authorization server
	// changed), for the client identity agent ("": the shared scope). It
	// is not called for an identity that never logged in, nor again
	// within ReauthorizeBackoff of a failure.
	Reauthorize func(ctx context.Context, agent string, store oauth.Store, ch oauth.Challenge, step bool) error
}

// ReauthorizeBackoff is how long a connection waits after a failed
// re-authorization before it tries again: each try may register a client
// at the authorization server.
const ReauthorizeBackoff = time.Minute

// AuthError says that a remote server needs a login: its text is safe for
// the client and the log (it names no token).
type AuthError struct {
	Server string
	// Flags follow `mcpbox login SERVER` in the command the error names:
	// the gateway's config and state dir, the client identity whose
	// token it is (RemoteOAuth.LoginFlags, --client).
	Flags  string
	StepUp bool
	Scope  string // the scope the server asked for, if it said
}

func (e *AuthError) Error() string {
	if e.StepUp && e.Scope != "" {
		// mcpbox login alone would ask for the scope of a plain 401 again.
		// The scope is the server's: quoted so that pasting the command
		// runs nothing it holds ($(...), backquotes).
		return fmt.Sprintf("server %s needs more scope: run `mcpbox login %s%s --scope %s`", e.Server, e.Server, e.Flags, ShellWord(e.Scope))
	}
	what := "needs authorization"
	if e.StepUp {
		what = "needs more scope"
	}
	if e.Scope != "" {
		what += fmt.Sprintf(" (scope %q)", e.Scope)
	}
	return fmt.Sprintf("server %s %s: run `mcpbox login %s%s`", e.Server, what, e.Server, e.Flags)
}

// ClientMessage is the error's text: it is safe for the client
// (gateway.ClientMessage).
func (e *AuthError) ClientMessage() string { return e.Error() }

// oauthTransport wraps next (the static headers) with the token of the
// scope's agent.
func (l *Remote) oauthTransport(scope gateway.Scope, next http.RoundTripper, sse bool) (http.RoundTripper, error) {
	store, err := l.oauth.Store(scope.Agent)
	if err != nil {
		return nil, fmt.Errorf("server %s: token store: %w", l.oauth.Name, err)
	}
	bs := bookStore{store, l.book}
	t := &oauth.Transport{Server: l.url, Store: bs, Base: next, SameOrigin: sse}
	if l.oauth.Reauthorize != nil {
		do := l.oauth.Reauthorize
		t.Authorize = (&reauthorizer{server: l.url, store: bs, do: func(ctx context.Context, store oauth.Store, ch oauth.Challenge, step bool) error {
			return do(ctx, scope.Agent, store, ch, step)
		}}).authorize
	}
	var flags string
	if l.oauth.LoginFlags != nil {
		flags = l.oauth.LoginFlags(scope.Agent)
	}
	return authErrors{t, l.oauth.Name, flags}, nil
}

// reauthorizer is a connection's oauth.AuthorizeFunc: a silent login,
// only for an identity that has logged in before (the person agreed to
// this server once), and not again within ReauthorizeBackoff of a
// failure. oauth.Transport runs it under its lock.
type reauthorizer struct {
	server string
	store  oauth.Store
	do     func(ctx context.Context, store oauth.Store, ch oauth.Challenge, step bool) error

	// Guarded by the transport's lock: when the last try failed, why, and
	// the grant it was made with (a hash of its access token).
	failed     time.Time
	lastErr    error
	failedWith [sha256.Size]byte
}

func (r *reauthorizer) authorize(ctx context.Context, ch oauth.Challenge, step bool) error {
	g, err := r.store.Load(ctx, r.server)
	if err != nil {
		return err // never logged in (or the record is unusable): mcpbox login
	}
	held := sha256.Sum256([]byte(g.AccessToken))
	// The backoff is for the grant that failed: a login since (mcpbox
	// login, another connection's) is tried at once.
	if !r.failed.IsZero() && time.Since(r.failed) < ReauthorizeBackoff && held == r.failedWith {
		return r.lastErr
	}
	if err := r.do(ctx, r.store, ch, step); err != nil {
		r.failed, r.lastErr, r.failedWith = time.Now(), err, held
		return err
	}
	r.failed, r.lastErr = time.Time{}, nil
	return nil
}

// authErrors turns the transport's *oauth.AuthRequiredError into an
// *AuthError, whose text survives the MCP client's wrapping.
type authErrors struct {
	next   http.RoundTripper
	server string
	flags  string // AuthError.Flags
}

func (t authErrors) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	var ae *oauth.AuthRequiredError
	if errors.As(err, &ae) {
		return nil, &AuthError{Server: t.server, Flags: t.flags, StepUp: ae.StepUp, Scope: ae.Challenge.Scope}
	}
	return resp, err
}

// bookStore teaches the redaction book the secrets of every grant it
// loads or saves, so that a server echoing its token sees it redacted.
type bookStore struct {
	oauth.Store
	book *redact.Book
}

func (s bookStore) learn(g *oauth.Grant) error {
	if s.book == nil || g == nil {
		return nil
	}
	for _, v := range g.Secrets() {
		if len(v) < redact.MinValueLen {
			continue
		}
		if err := s.book.Add("oauth_token", []byte(v)); err != nil {
			return fmt.Errorf("oauth token: %w", err)
		}
	}
	return nil
}

func (s bookStore) Load(ctx context.Context, server string) (*oauth.Grant, error) {
	g, err := s.Store.Load(ctx, server)
	if err != nil {
		return nil, err
	}
	return g, s.learn(g)
}

// LockGrant passes on the store's lock (oauth.Locker): without it, every
// connection refreshed a rotating refresh token of its own accord.
func (s bookStore) LockGrant(ctx context.Context, server string) (func(), error) {
	if l, ok := s.Store.(oauth.Locker); ok {
		return l.LockGrant(ctx, server)
	}
	return func() {}, nil
}

func (s bookStore) Save(ctx context.Context, g *oauth.Grant) error {
	if err := s.learn(g); err != nil {
		return err
	}
	return s.Store.Save(ctx, g)
}

// ShellWord is s as one word of a command to paste into a shell: as it
// is when it holds nothing a shell reads specially, else single-quoted.
func ShellWord(s string) string {
	special := func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@+:=,/%", r))
	}
	if s != "" && !strings.ContainsFunc(s, special) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
