package oauth

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors. Errors of this package never carry a token, a code, a
// verifier or a client secret: they name the step and the URL refused.
var (
	// ErrStateMismatch: the redirect carried a state other than the one
	// sent (a forged or replayed authorization response).
	ErrStateMismatch = errors.New("authorization response state does not match the request")
	// ErrIssuerMismatch: an issuer (metadata "issuer" or the RFC 9207
	// "iss" response parameter) differs from the authorization server in use.
	ErrIssuerMismatch = errors.New("issuer does not match the authorization server")
	// ErrResourceMismatch: the protected resource metadata names a
	// resource other than the server being accessed.
	ErrResourceMismatch = errors.New("protected resource metadata names another resource")
	// ErrNoPKCE: the authorization server does not advertise S256 PKCE.
	ErrNoPKCE = errors.New("authorization server does not support PKCE S256")
	// ErrNoRegistration: no client id is configured, the server takes no
	// client id metadata document and offers no dynamic registration.
	ErrNoRegistration = errors.New("no way to register a client with the authorization server")
	// ErrLoginTimeout: the redirect did not arrive within the wait.
	ErrLoginTimeout = errors.New("timed out waiting for the authorization redirect")
	// ErrInteractionRequired: a silent authorization (LoginOptions.Silent)
	// met a server that wants a person to log in or consent.
	ErrInteractionRequired = errors.New("the authorization server wants a person to log in")
	// ErrScopeNotAllowed: a silent authorization would ask for a scope
	// beyond LoginOptions.SilentScopes and the held grant's; a person
	// decides (mcpbox login --scope). It is an ErrInteractionRequired.
	ErrScopeNotAllowed = fmt.Errorf("a person must agree to this scope: %w", ErrInteractionRequired)
	// ErrNoToken: the store holds no token for the resource.
	ErrNoToken = errors.New("no stored token")
	// ErrTokenCorrupt: a stored token could not be decrypted or does not
	// belong to the binding it was looked up for.
	ErrTokenCorrupt = errors.New("stored token cannot be decrypted or is bound to something else")
	// ErrTokenKept: Logout could not read a stored grant for now (the
	// store's key, a permission) and kept it, so that a later logout can
	// revoke its tokens.
	ErrTokenKept = errors.New("the stored tokens are kept")
	// ErrInvalidToken: an access token presented to the gateway is refused.
	ErrInvalidToken = errors.New("invalid access token")
)

// AuthRequiredError is returned by Transport when the server asks for
// authorization (401) and no token, or no usable one, is at hand, or when
// it asks for a scope (403 insufficient_scope) that the stored grant
// lacks, and no Authorize hook could fix it. The caller tells the user to
// log in (mcpbox login SERVER).
type AuthRequiredError struct {
	// Resource is the server URL the transport is bound to.
	Resource string
	// Challenge is the server's parsed WWW-Authenticate challenge.
	Challenge Challenge
	// StepUp reports a 403 insufficient_scope (more scope is needed).
	StepUp bool
	// Err is why an automatic fix failed, if one was tried.
	Err error
}

func (e *AuthRequiredError) Error() string {
	var b strings.Builder
	if e.StepUp {
		fmt.Fprintf(&b, "server %s needs more scope", e.Resource)
	} else {
		fmt.Fprintf(&b, "server %s needs authorization", e.Resource)
	}
	if e.Challenge.Scope != "" {
		fmt.Fprintf(&b, " (scope %q)", e.Challenge.Scope)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *AuthRequiredError) Unwrap() error { return e.Err }

// oauthError is an error response of an authorization server endpoint
// (RFC 6749 §5.2). Only the error code and description are kept; the
// description is the server's text, cut short.
type oauthError struct {
	Endpoint    string
	Status      int
	Code        string
	Description string
}

func (e *oauthError) Error() string {
	s := fmt.Sprintf("%s answered %d", e.Endpoint, e.Status)
	if e.Code != "" {
		s += " " + shown(e.Code)
	}
	if e.Description != "" {
		d := e.Description
		if len(d) > 200 {
			d = d[:200]
		}
		s += ": " + shown(d)
	}
	return s
}

// shown is a server's text as an error may print it: quoted, with
// escapes, when it holds a character that does not show as itself (an
// escape sequence for the terminal, a line break that would forge a line
// of mcpbox's own, a bidi control). The text comes from an authorization
// server that an untrusted remote server may have named.
func shown(s string) string {
	hidden := func(r rune) bool { return r == utf8.RuneError || !unicode.IsGraphic(r) }
	if strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	return strconv.QuoteToGraphic(s)
}
