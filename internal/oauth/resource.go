package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Defaults of ValidatorOptions.
const (
	DefaultLeeway        = 30 * time.Second
	DefaultRefetchGap    = time.Minute
	DefaultKeysMaxAge    = time.Hour
	DefaultIdentityClaim = "sub"
)

// signingAlgs are the JWS algorithms accepted: asymmetric only, so "none"
// and HMAC keyed with a public key (algorithm confusion) never verify.
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// ValidatorOptions configures a Validator. Issuer and Audience are
// required.
type ValidatorOptions struct {
	// Issuer is the authorization server whose tokens are accepted; its
	// metadata names the JWKS.
	Issuer string
	// Audience is the gateway's resource URI; a token's aud must hold it.
	Audience string
	// IdentityClaim names the string claim that becomes the client
	// identity; zero means DefaultIdentityClaim ("sub").
	IdentityClaim string
	// GenericType also accepts tokens whose typ header is the generic
	// "JWT" or absent, from issuers that do not type their access tokens
	// as RFC 9068 says. False: typ must be at+jwt (or application/at+jwt),
	// so that an ID token or another JWT the issuer signs for the same
	// audience is not taken for an access token. A typ that names another
	// kind of JWT (logout+jwt, ...) is refused either way.
	GenericType bool
	// HTTPClient fetches metadata and keys; nil means a default client.
	HTTPClient *http.Client
	// Leeway is the clock skew allowed on exp, nbf and iat; zero means
	// DefaultLeeway.
	Leeway time.Duration
	// RefetchGap is the least time between two JWKS fetches caused by an
	// unknown key id, a signature that does not verify or keys past
	// KeysMaxAge; zero means DefaultRefetchGap.
	RefetchGap time.Duration
	// KeysMaxAge is how long fetched keys are used before a token waits
	// for them to be fetched again, so that a key the issuer withdrew
	// stops verifying; zero means DefaultKeysMaxAge.
	KeysMaxAge time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Identity is what a valid access token says about its bearer.
type Identity struct {
	// Name is the value of the identity claim.
	Name string
	// Subject is the sub claim.
	Subject string
	// Scopes are from the scope (space-separated) or scp claim.
	Scopes []string
	// Expiry is the exp claim.
	Expiry time.Time
}

// Validator checks JWT access tokens (RFC 9068) from one issuer for one
// audience. It is safe for concurrent use.
type Validator struct {
	opts ValidatorOptions
	hc   *http.Client

	mu       sync.Mutex // guards the fields below
	jwksURI  string
	keys     *jose.JSONWebKeySet
	keysAt   time.Time     // when keys were fetched
	fetched  time.Time     // start of the last JWKS fetch
	fetching chan struct{} // closed when the running fetch ends; nil if none runs
	fetchErr error         // why the last fetch failed; nil if it did not
}

// jwksFetchTimeout bounds one fetch of the issuer's metadata and keys.
// keysRetry is the least time between two fetches while no keys have
// been fetched yet (an issuer not up yet, or down): shorter than
// RefetchGap, since until then every token is refused.
const (
	jwksFetchTimeout = 30 * time.Second
	keysRetry        = 10 * time.Second
)

// NewValidator checks opts and returns a Validator. Keys are fetched on
// first use.
func NewValidator(opts ValidatorOptions) (*Validator, error) {
	if opts.Issuer == "" || opts.Audience == "" {
		return nil, errors.New("token validator: issuer and audience are required")
	}
	if err := checkEndpoint(opts.Issuer); err != nil {
		return nil, fmt.Errorf("token validator: issuer %w", err)
	}
	if opts.IdentityClaim == "" {
		opts.IdentityClaim = DefaultIdentityClaim
	}
	if opts.Leeway <= 0 {
		opts.Leeway = DefaultLeeway
	}
	if opts.RefetchGap <= 0 {
		opts.RefetchGap = DefaultRefetchGap
	}
	if opts.KeysMaxAge <= 0 {
		opts.KeysMaxAge = DefaultKeysMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Validator{opts: opts, hc: orDefault(opts.HTTPClient, opts.Issuer)}, nil
}

// checkType checks the JWS typ header (RFC 9068 §2.1, §4): media types
// compare case-insensitively, and "application/" may be left out.
func (v *Validator) checkType(typ any) error {
	t, _ := typ.(string)
	t = strings.TrimPrefix(strings.ToLower(t), "application/")
	switch {
	case t == "at+jwt":
		return nil
	case v.opts.GenericType && (typ == nil || t == "jwt"):
		return nil
	case typ == nil:
		return fmt.Errorf("%w: no typ header, want at+jwt", ErrInvalidToken)
	}
	return fmt.Errorf("%w: typ %.40q is not at+jwt", ErrInvalidToken, t)
}

// Validate checks raw and returns the identity it carries. Every refusal
// wraps ErrInvalidToken and names the reason, never the token.
func (v *Validator) Validate(ctx context.Context, raw string) (*Identity, error) {
	tok, err := jwt.ParseSigned(raw, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("%w: not a JWS signed with RS256, ES256 or EdDSA", ErrInvalidToken)
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: want exactly one signature", ErrInvalidToken)
	}
	h := tok.Headers[0]
	if err := v.checkType(h.ExtraHeaders[jose.HeaderType]); err != nil {
		return nil, err
	}
	key, err := v.key(ctx, h.KeyID, h.Algorithm, nil)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var extra map[string]any
	if err := tok.Claims(key.Key, &std, &extra); err != nil {
		// The issuer may have put a new key under the id: its keys
		// again (once per RefetchGap), and the token checked once more.
		again, kerr := v.key(ctx, h.KeyID, h.Algorithm, key)
		if kerr != nil || tok.Claims(again.Key, &std, &extra) != nil {
			return nil, fmt.Errorf("%w: signature does not verify", ErrInvalidToken)
		}
	}
	if std.Expiry == nil {
		return nil, fmt.Errorf("%w: no exp claim", ErrInvalidToken)
	}
	exp := jwt.Expected{Issuer: v.opts.Issuer, AnyAudience: jwt.Audience{v.opts.Audience}, Time: v.opts.Now()}
	if err := std.ValidateWithLeeway(exp, v.opts.Leeway); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	name, _ := extra[v.opts.IdentityClaim].(string)
	if name == "" {
		return nil, fmt.Errorf("%w: no string claim %q", ErrInvalidToken, v.opts.IdentityClaim)
	}
	// An email is an identity only once the issuer has verified it: at
	// many issuers a user may set any address, someone else's included.
	if v.opts.IdentityClaim == "email" && extra["email_verified"] != true {
		return nil, fmt.Errorf("%w: email claim not verified (email_verified)", ErrInvalidToken)
	}
	id := &Identity{Name: name, Subject: std.Subject, Expiry: std.Expiry.Time()}
	switch s := extra["scope"].(type) {
	case string:
		id.Scopes = strings.Fields(s)
	}
	if len(id.Scopes) == 0 {
		if scp, ok := extra["scp"].([]any); ok {
			for _, x := range scp {
				if s, ok := x.(string); ok {
					id.Scopes = append(id.Scopes, s)
				}
			}
		}
	}
	return id, nil
}

// key returns the verification key for kid and alg. The JWKS is fetched
// on first use, and again for an unknown kid (key rotation), for keys
// older than KeysMaxAge (an issuer withdraws a key by leaving it out; in
// the background, the keys held still verify until it ends), and when
// the key held is the refused one (its signature did not verify: an
// issuer may rotate a key under its id), at most once per RefetchGap
// (keysRetry until a fetch has succeeded), failures included.
// A failed fetch keeps the keys held: one of them still verifies (an
// issuer that is down locks nobody out), an unknown kid is refused. One
// fetch runs at a time, on a context of its own: a token that comes
// while it runs waits for its keys, and a client that sent a token of an
// unknown kid and hung up cannot cut short the gap's one fetch (the keys
// an issuer rotated to would stay unknown).
func (v *Validator) key(ctx context.Context, kid, alg string, refused *jose.JSONWebKey) (*jose.JSONWebKey, error) {
	v.mu.Lock()
	keys, fetching := v.keys, v.fetching
	gap := v.opts.RefetchGap
	if keys == nil {
		gap = min(gap, keysRetry)
	}
	start := func() {
		if fetching == nil && (v.fetched.IsZero() || v.opts.Now().Sub(v.fetched) >= gap) {
			fetching = make(chan struct{})
			v.fetching, v.fetched = fetching, v.opts.Now()
			go v.fetch(fetching)
		}
	}
	if keys != nil && refused == nil {
		if k, err := pick(keys, kid, alg); k != nil || err != nil {
			if v.opts.Now().Sub(v.keysAt) >= v.opts.KeysMaxAge {
				// Aged: read again, without waiting: a token is checked
				// with the keys held until the fetch has ended, so an
				// issuer that hangs stalls nobody.
				start()
			}
			v.mu.Unlock()
			return k, err
		}
	}
	start()
	v.mu.Unlock()
	if fetching != nil {
		select {
		case <-fetching:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", ErrInvalidToken, ctx.Err())
		}
		v.mu.Lock()
		var err error
		keys, err = v.keys, v.fetchErr
		v.mu.Unlock()
		if err != nil {
			if k, _ := pickOf(keys, kid, alg); k == nil {
				return nil, err
			}
		}
	}
	if keys == nil {
		return nil, fmt.Errorf("%w: the issuer's keys are unavailable", ErrInvalidToken)
	}
	return pickKnown(keys, kid, alg)
}

// pickOf is pick of a set that may be nil.
func pickOf(keys *jose.JSONWebKeySet, kid, alg string) (*jose.JSONWebKey, error) {
	if keys == nil {
		return nil, nil
	}
	return pick(keys, kid, alg)
}

// pickKnown is pick, with an unknown kid an error.
func pickKnown(keys *jose.JSONWebKeySet, kid, alg string) (*jose.JSONWebKey, error) {
	k, err := pick(keys, kid, alg)
	if k == nil && err == nil {
		err = fmt.Errorf("%w: unknown key id %q", ErrInvalidToken, kid)
	}
	return k, err
}

// fetch fetches the issuer's JWKS (and, the first time, its metadata),
// keeps the keys or why it failed, and closes done.
func (v *Validator) fetch(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	v.mu.Lock()
	jwksURI := v.jwksURI
	v.mu.Unlock()
	keys, err := v.fetchKeys(ctx, &jwksURI)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err == nil {
		v.keys, v.jwksURI, v.keysAt = keys, jwksURI, v.opts.Now()
	}
	v.fetchErr, v.fetching = err, nil
	close(done)
}

// fetchKeys fetches the public signing keys of the JWKS at *jwksURI,
// first finding it in the issuer's metadata if it is "".
func (v *Validator) fetchKeys(ctx context.Context, jwksURI *string) (*jose.JSONWebKeySet, error) {
	if *jwksURI == "" {
		urls, err := serverMetadataURLs(v.opts.Issuer)
		if err != nil {
			return nil, err
		}
		sm, _, err := fetchServerMetadata(ctx, v.hc, v.opts.Issuer, urls)
		if err != nil {
			return nil, fmt.Errorf("token validator: %w", err)
		}
		if sm.JWKSURI == "" {
			return nil, fmt.Errorf("token validator: metadata of %s has no jwks_uri", v.opts.Issuer)
		}
		*jwksURI = sm.JWKSURI
	}
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, v.hc, *jwksURI, &set); err != nil {
		return nil, fmt.Errorf("token validator: %w", err)
	}
	// Only public signing keys: a symmetric or private key in a JWKS is
	// a misconfiguration that must not become a verification key.
	pub := &jose.JSONWebKeySet{}
	for _, k := range set.Keys {
		if k.IsPublic() && k.Valid() && (k.Use == "" || k.Use == "sig") {
			pub.Keys = append(pub.Keys, k)
		}
	}
	return pub, nil
}

// pick chooses the key for kid (the only key if kid is empty and there is
// one) whose declared algorithm, if any, is alg.
func pick(set *jose.JSONWebKeySet, kid, alg string) (*jose.JSONWebKey, error) {
	var k *jose.JSONWebKey
	if kid == "" {
		if len(set.Keys) != 1 {
			return nil, fmt.Errorf("%w: no key id and the issuer has %d keys", ErrInvalidToken, len(set.Keys))
		}
		k = &set.Keys[0]
	} else {
		ks := set.Key(kid)
		if len(ks) == 0 {
			return nil, nil
		}
		k = &ks[0]
	}
	if k.Algorithm != "" && k.Algorithm != alg {
		return nil, fmt.Errorf("%w: key %q is for %s, token says %s", ErrInvalidToken, kid, k.Algorithm, alg)
	}
	return k, nil
}

// WriteChallenge answers w with status (401 or 403) and ch as the
// WWW-Authenticate header, the way a protected resource refuses a
// request (RFC 6750 §3).
func WriteChallenge(w http.ResponseWriter, status int, ch Challenge) {
	w.Header().Set("WWW-Authenticate", ch.String())
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, http.StatusText(status), status)
}

// BearerToken returns the token of r's "Authorization: Bearer" header.
func BearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// MetadataPath is the path of the well-known protected resource metadata
// of resource (RFC 9728 §3.1): the well-known prefix followed by the
// resource's path, if it has one.
func MetadataPath(resource string) string {
	p := "/.well-known/oauth-protected-resource"
	if u, err := url.Parse(resource); err == nil {
		p += strings.TrimSuffix(u.EscapedPath(), "/")
	}
	return p
}

// MetadataURL is the absolute URL of MetadataPath(resource), what the
// gateway puts in resource_metadata of its WWW-Authenticate challenges.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + MetadataPath(resource)
}

// MetadataHandler serves rm as protected resource metadata (GET and HEAD
// only). Mount it at MetadataPath(rm.Resource), and at the root
// well-known path if the resource has a path.
func MetadataHandler(rm ResourceMetadata) http.Handler {
	if len(rm.BearerMethodsSupported) == 0 {
		rm.BearerMethodsSupported = []string{"header"}
	}
	body, _ := json.Marshal(rm)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Write(body)
	})
}
