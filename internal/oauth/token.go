package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client authentication methods at the token endpoint (RFC 7591 §2).
const (
	AuthNone        = "none"
	AuthSecretBasic = "client_secret_basic"
	AuthSecretPost  = "client_secret_post"
)

// tokenResponse is a successful token endpoint answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// postForm sends form to endpoint with the client's authentication and
// returns the body of a 2xx answer. A non-2xx answer becomes an
// *oauthError with the server's error code and description only.
func postForm(ctx context.Context, hc *http.Client, endpoint string, form url.Values, g *Grant) ([]byte, error) {
	if err := checkEndpoint(endpoint); err != nil {
		return nil, err
	}
	form.Set("client_id", g.ClientID)
	if g.AuthMethod == AuthSecretPost && g.ClientSecret != "" {
		form.Set("client_secret", g.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if g.AuthMethod == AuthSecretBasic && g.ClientSecret != "" {
		// RFC 6749 §2.3.1: both parts form-urlencoded before Basic.
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		// url.Error names the URL only; the form is not in it.
		return nil, fmt.Errorf("calling %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	if err != nil {
		return nil, fmt.Errorf("reading answer of %s: %w", endpoint, err)
	}
	if resp.StatusCode/100 != 2 {
		oe := &oauthError{Endpoint: endpoint, Status: resp.StatusCode}
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(body, &e) == nil {
			oe.Code, oe.Description = e.Error, scrub(e.Description, form, g)
		}
		return nil, oe
	}
	return body, nil
}

// scrub removes the secrets of a request from a server's error text, in
// case the server echoes them.
func scrub(s string, form url.Values, g *Grant) string {
	secrets := []string{g.ClientSecret, g.AccessToken, g.RefreshToken}
	for _, k := range []string{"code", "code_verifier", "refresh_token", "token", "client_secret"} {
		secrets = append(secrets, form.Get(k))
	}
	for _, v := range secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// requestToken calls the token endpoint with form and updates g with the
// answer: the access token, expiry, scope and (if rotated) refresh token.
func requestToken(ctx context.Context, hc *http.Client, g *Grant, form url.Values, now time.Time) error {
	body, err := postForm(ctx, hc, g.TokenEndpoint, form, g)
	if err != nil {
		return err
	}
	var tr tokenResponse
	if err := json.Unmarshal(body, &tr); err != nil {
		return fmt.Errorf("decoding answer of %s: not a token response", g.TokenEndpoint)
	}
	if tr.AccessToken == "" {
		return fmt.Errorf("answer of %s has no access_token", g.TokenEndpoint)
	}
	if !strings.EqualFold(tr.TokenType, "bearer") {
		return fmt.Errorf("answer of %s has token_type %q, want Bearer", g.TokenEndpoint, tr.TokenType)
	}
	g.AccessToken = tr.AccessToken
	if tr.RefreshToken != "" {
		g.RefreshToken = tr.RefreshToken
	}
	g.Expiry, g.Issued = time.Time{}, now
	if tr.ExpiresIn > 0 {
		g.Expiry = now.Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	if tr.Scope != "" {
		g.Scope = tr.Scope
	}
	return nil
}

// Refresh trades g's refresh token for a new access token (RFC 6749 §6),
// with the RFC 8707 resource indicator, and updates g in place.
func Refresh(ctx context.Context, hc *http.Client, g *Grant) error {
	if g.RefreshToken == "" {
		return errors.New("refreshing token: the grant has no refresh token")
	}
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {g.RefreshToken},
		"resource":      {g.Resource},
	}
	if err := requestToken(ctx, orDefault(hc, g.Server), g, form, time.Now()); err != nil {
		return fmt.Errorf("refreshing token for %s: %w", g.Resource, err)
	}
	return nil
}

// Revoke revokes g's refresh token and access token at the server's
// revocation endpoint (RFC 7009), if it has one; it reports whether it
// did. Revoking the refresh token ends the whole grant at most servers;
// the access token is revoked as well for those that keep them apart.
func Revoke(ctx context.Context, hc *http.Client, g *Grant) (bool, error) {
	if g.RevocationEndpoint == "" {
		return false, nil
	}
	hc = orDefault(hc, g.Server)
	var errs []error
	for _, t := range []struct{ tok, hint string }{
		{g.RefreshToken, "refresh_token"},
		{g.AccessToken, "access_token"},
	} {
		if t.tok == "" {
			continue
		}
		form := url.Values{"token": {t.tok}, "token_type_hint": {t.hint}}
		if _, err := postForm(ctx, hc, g.RevocationEndpoint, form, g); err != nil {
			errs = append(errs, fmt.Errorf("revoking %s: %w", t.hint, err))
		}
	}
	return true, errors.Join(errs...)
}

// Logout revokes the grant of server where the authorization server
// allows it and removes it from store. The grant is removed even if
// revocation fails, and a corrupt one too (nothing could ever revoke
// it); the error then says so. One that cannot be read for now (the
// store's key or the file unreadable) is kept, and the error wraps
// ErrTokenKept: deleted, its tokens would stay valid with nobody able
// to revoke them.
func Logout(ctx context.Context, hc *http.Client, store Store, server string) (revoked bool, err error) {
	// Under the grant's lock: a serve refreshing meanwhile would save the
	// successor of the refresh token revoked here, and the login would
	// be back.
	unlock, err := lockGrant(ctx, store, server)
	if err != nil {
		return false, err
	}
	defer unlock()
	g, err := store.Load(ctx, server)
	switch {
	case errors.Is(err, ErrNoToken):
		return false, err
	case err != nil && !errors.Is(err, ErrTokenCorrupt):
		return false, fmt.Errorf("%w: %w", ErrTokenKept, err)
	}
	var rerr error
	if err == nil {
		revoked, rerr = Revoke(ctx, hc, g)
	}
	if derr := store.Delete(ctx, server); derr != nil {
		return revoked, derr
	}
	if err != nil {
		return false, err // corrupt record: deleted, nothing to revoke
	}
	return revoked, rerr
}

// lockGrant takes server's grant lock if store is a Locker.
func lockGrant(ctx context.Context, store Store, server string) (func(), error) {
	if l, ok := store.(Locker); ok {
		return l.LockGrant(ctx, server)
	}
	return func() {}, nil
}

// orDefault returns a copy of hc (or of a default client with a 30 s
// timeout whose connections stay within the networks anchor's host is
// in, guard.go) whose redirects stay on https (or loopback http), never go
// from https to http nor from a remote host to loopback (a remote server
// must not make mcpbox fetch local services), and stop after five.
func orDefault(hc *http.Client, anchor string) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	} else {
		c = *guardedClient(anchor)
	}
	prev := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if err := checkEndpoint(req.URL.String()); err != nil {
			return fmt.Errorf("redirect refused: %w", err)
		}
		from := via[len(via)-1].URL
		if from.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect refused: %s to %s drops TLS", from.Host, req.URL.Host)
		}
		if !isLoopback(from.Hostname()) && isLoopback(req.URL.Hostname()) {
			return fmt.Errorf("redirect refused: %s sends to loopback %s", from.Host, req.URL.Host)
		}
		if prev != nil {
			return prev(req, via)
		}
		return nil
	}
	return &c
}
