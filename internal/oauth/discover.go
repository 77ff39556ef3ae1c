package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// maxMetadata bounds a metadata, JWKS or token response body.
const maxMetadata = 1 << 20

// ResourceMetadata is the part of OAuth 2.0 Protected Resource Metadata
// (RFC 9728) that the flow reads and the gateway serves.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// ServerMetadata is the part of OAuth 2.0 Authorization Server Metadata
// (RFC 8414) or OpenID Provider Metadata that the flow reads.
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                string   `json:"revocation_endpoint,omitempty"`
	JWKSURI                           string   `json:"jwks_uri,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported,omitempty"`
	// AuthorizationResponseIssParameterSupported: the server puts "iss"
	// in its authorization responses (RFC 9207), and the client must
	// require and check it.
	AuthorizationResponseIssParameterSupported bool `json:"authorization_response_iss_parameter_supported,omitempty"`
}

// Discovery is what discovery found for one server: its resource
// metadata and the metadata of the authorization server chosen.
type Discovery struct {
	Resource ResourceMetadata
	Server   ServerMetadata
}

// Discover finds the protected resource metadata of the MCP server at
// serverURL and the metadata of its (first) authorization server. ch is
// the server's 401 challenge, if the caller has one: its
// resource_metadata URL is tried first. The resource the metadata names
// must be serverURL or a prefix of it at the same origin; the issuer the
// authorization server metadata names must be the one asked for.
func Discover(ctx context.Context, hc *http.Client, serverURL string, ch Challenge) (*Discovery, error) {
	return discover(ctx, hc, serverURL, ch, "")
}

// discover is Discover with an optional pinned issuer.
func discover(ctx context.Context, hc *http.Client, serverURL string, ch Challenge, pin string) (*Discovery, error) {
	hc = orDefault(hc, serverURL)
	rm, err := discoverResource(ctx, hc, serverURL, ch)
	if errors.Is(err, errNoResourceMetadata) {
		return discoverLegacy(ctx, hc, serverURL, pin)
	}
	if err != nil {
		return nil, err
	}
	if len(rm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("protected resource metadata of %s names no authorization server", serverURL)
	}
	issuer := rm.AuthorizationServers[0]
	if pin != "" {
		if !slices.Contains(rm.AuthorizationServers, pin) {
			return nil, fmt.Errorf("protected resource metadata of %s names %q, not the configured %s: %w", serverURL, rm.AuthorizationServers, pin, ErrIssuerMismatch)
		}
		issuer = pin
	}
	sm, err := DiscoverServer(ctx, hc, issuer)
	if err != nil {
		return nil, err
	}
	return &Discovery{Resource: *rm, Server: *sm}, nil
}

// discoverLegacy follows the 2025-03-26 revision for a server without
// resource metadata: the authorization server is the server's origin,
// its metadata at the origin's RFC 8414 well-known URL, and, failing
// that (404), its endpoints at the default paths /authorize, /token and
// /register. The resource indicator is the server URL.
func discoverLegacy(ctx context.Context, hc *http.Client, serverURL, pin string) (*Discovery, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", serverURL, err)
	}
	origin := u.Scheme + "://" + u.Host
	if pin != "" && pin != origin {
		return nil, fmt.Errorf("server %s publishes no resource metadata, so its authorization server is %s, not the configured %s: %w", serverURL, origin, pin, ErrIssuerMismatch)
	}
	d := &Discovery{Resource: ResourceMetadata{Resource: serverURL, AuthorizationServers: []string{origin}}}
	mu := origin + "/.well-known/oauth-authorization-server"
	sm, _, err := fetchServerMetadata(ctx, hc, origin, []string{mu})
	switch {
	case err == nil:
		if err := sm.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", mu, err)
		}
		d.Server = *sm
	case isNotFound(err):
		d.Server = ServerMetadata{
			Issuer:                        origin,
			AuthorizationEndpoint:         origin + "/authorize",
			TokenEndpoint:                 origin + "/token",
			RegistrationEndpoint:          origin + "/register",
			CodeChallengeMethodsSupported: []string{"S256"}, // required of 2025-03-26 servers
		}
	default:
		return nil, err
	}
	return d, nil
}

func isNotFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.Status >= 400 && se.Status < 500
}

// Probe sends an unauthenticated JSON-RPC ping to serverURL and returns
// the challenge of its 401 answer, if it gave one. It lets a login start
// without a prior failed call.
func Probe(ctx context.Context, hc *http.Client, serverURL string) (Challenge, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL,
		strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return Challenge{}, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := orDefault(hc, serverURL).Do(req)
	if err != nil {
		return Challenge{}, false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusUnauthorized {
		return Challenge{}, false
	}
	return ParseChallenge(resp.Header)
}

// resourceMetadataURLs lists where RFC 9728 metadata of serverURL may be:
// the challenge's URL, then the path-suffixed well-known URL, then the
// root one (MCP authorization, "Protected Resource Metadata Discovery").
func resourceMetadataURLs(serverURL string, ch Challenge) ([]string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("server URL %q is not an absolute URL", serverURL)
	}
	var out []string
	if ch.ResourceMetadata != "" {
		if err := notIntoLoopback(serverURL, ch.ResourceMetadata); err != nil {
			return nil, fmt.Errorf("resource_metadata of %s: %w", serverURL, err)
		}
		out = append(out, ch.ResourceMetadata)
	}
	origin := u.Scheme + "://" + u.Host
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		out = append(out, origin+"/.well-known/oauth-protected-resource"+p)
	}
	return append(out, origin+"/.well-known/oauth-protected-resource"), nil
}

func discoverResource(ctx context.Context, hc *http.Client, serverURL string, ch Challenge) (*ResourceMetadata, error) {
	urls, err := resourceMetadataURLs(serverURL, ch)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, mu := range urls {
		var rm ResourceMetadata
		if err := getJSON(ctx, hc, mu, &rm); err != nil {
			errs = append(errs, err)
			continue
		}
		if !resourceCovers(rm.Resource, serverURL) {
			return nil, fmt.Errorf("%s: resource %q for server %s: %w", mu, rm.Resource, serverURL, ErrResourceMismatch)
		}
		for _, as := range rm.AuthorizationServers {
			if err := checkEndpoint(as); err != nil {
				return nil, fmt.Errorf("%s: authorization server: %w", mu, err)
			}
			if err := notIntoLoopback(serverURL, as); err != nil {
				return nil, fmt.Errorf("%s: authorization server: %w", mu, err)
			}
		}
		return &rm, nil
	}
	err = fmt.Errorf("finding protected resource metadata of %s: %w", serverURL, errors.Join(errs...))
	if allNotFound(errs) {
		err = fmt.Errorf("%w (%w)", errNoResourceMetadata, err)
	}
	return nil, err
}

// errNoResourceMetadata: the server publishes no protected resource
// metadata (a server of the 2025-03-26 revision).
var errNoResourceMetadata = errors.New("no protected resource metadata")

// resourceCovers reports whether the resource identifier res names
// server: the same URL, or the same origin with a path that is a prefix
// of the server's at a segment boundary (RFC 9728 §3.3 with MCP's
// canonical server URI).
func resourceCovers(res, server string) bool {
	r, err1 := url.Parse(res)
	s, err2 := url.Parse(server)
	if err1 != nil || err2 != nil || r.Host == "" || r.Fragment != "" {
		return false
	}
	if !strings.EqualFold(r.Scheme, s.Scheme) || !strings.EqualFold(r.Host, s.Host) {
		return false
	}
	rp, sp := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(s.Path, "/")
	return rp == sp || strings.HasPrefix(sp, rp+"/")
}

// serverMetadataURLs lists where the metadata of issuer may be, in the
// order the MCP authorization spec gives ("Authorization Server Metadata
// Discovery"): RFC 8414 with the path inserted, OpenID Connect with the
// path inserted, OpenID Connect with the path appended; for an issuer
// without a path the two root URLs.
func serverMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("issuer %q is not a URL without query and fragment", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{
			origin + "/.well-known/oauth-authorization-server",
			origin + "/.well-known/openid-configuration",
		}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration",
	}, nil
}

// DiscoverServer fetches the metadata of the authorization server issuer,
// trying the well-known URLs in the spec's order. The metadata's issuer
// must equal issuer (RFC 8414 §3.3), its endpoints must be https (or
// http on loopback), and it must offer PKCE S256.
func DiscoverServer(ctx context.Context, hc *http.Client, issuer string) (*ServerMetadata, error) {
	if err := checkEndpoint(issuer); err != nil {
		return nil, fmt.Errorf("authorization server: %w", err)
	}
	urls, err := serverMetadataURLs(issuer)
	if err != nil {
		return nil, err
	}
	sm, mu, err := fetchServerMetadata(ctx, orDefault(hc, issuer), issuer, urls)
	if err != nil {
		return nil, err
	}
	if err := sm.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", mu, err)
	}
	return sm, nil
}

// fetchServerMetadata returns the first metadata document found at urls
// and where it was; its issuer must be issuer.
func fetchServerMetadata(ctx context.Context, hc *http.Client, issuer string, urls []string) (*ServerMetadata, string, error) {
	var errs []error
	for _, mu := range urls {
		var sm ServerMetadata
		if err := getJSON(ctx, hc, mu, &sm); err != nil {
			errs = append(errs, err)
			continue
		}
		if sm.Issuer != issuer {
			return nil, mu, fmt.Errorf("%s: metadata issuer %q, want %q: %w", mu, sm.Issuer, issuer, ErrIssuerMismatch)
		}
		return &sm, mu, nil
	}
	return nil, "", fmt.Errorf("finding authorization server metadata of %s: %w", issuer, errors.Join(errs...))
}

func (sm *ServerMetadata) check() error {
	for _, e := range []struct{ name, v string }{
		{"authorization_endpoint", sm.AuthorizationEndpoint},
		{"token_endpoint", sm.TokenEndpoint},
	} {
		if e.v == "" {
			return fmt.Errorf("metadata has no %s", e.name)
		}
	}
	for _, e := range []struct{ name, v string }{
		{"authorization_endpoint", sm.AuthorizationEndpoint},
		{"token_endpoint", sm.TokenEndpoint},
		{"registration_endpoint", sm.RegistrationEndpoint},
		{"revocation_endpoint", sm.RevocationEndpoint},
		{"jwks_uri", sm.JWKSURI},
	} {
		if e.v == "" {
			continue
		}
		if err := checkEndpoint(e.v); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if err := notIntoLoopback(sm.Issuer, e.v); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	if !slices.Contains(sm.CodeChallengeMethodsSupported, "S256") {
		return ErrNoPKCE
	}
	return nil
}

// checkEndpoint accepts https URLs, and http URLs on a loopback host
// (local development and tests), nothing else.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q: only https, or http on loopback, is accepted", raw)
}

// notIntoLoopback refuses a URL on a loopback host named by a document
// of a host that is not loopback: a remote server or authorization server
// must not make mcpbox send requests (or codes and tokens) to local
// services.
func notIntoLoopback(from, to string) error {
	f, err1 := url.Parse(from)
	t, err2 := url.Parse(to)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%q is not a URL", to)
	}
	if !isLoopback(f.Hostname()) && isLoopback(t.Hostname()) {
		return fmt.Errorf("%s points into loopback (%s)", f.Host, t.Host)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// getJSON fetches u into v: status 200, a JSON media type, at most
// maxMetadata bytes.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	if err := checkEndpoint(u); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &statusError{URL: u, Status: resp.StatusCode}
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return fmt.Errorf("fetching %s: content type %q is not JSON", u, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", u, err)
	}
	return nil
}

// statusError is a metadata fetch answered with a status other than 200.
type statusError struct {
	URL    string
	Status int
}

func (e *statusError) Error() string { return fmt.Sprintf("fetching %s: status %d", e.URL, e.Status) }

// allNotFound reports whether every error in errs is a 4xx answer: the
// document does not exist (as opposed to a server or network failure).
func allNotFound(errs []error) bool {
	for _, err := range errs {
		var se *statusError
		if !errors.As(err, &se) || se.Status < 400 || se.Status >= 500 {
			return false
		}
	}
	return len(errs) > 0
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
