// Package oauth is mcpbox's OAuth 2.1 core for the MCP authorization
// spec, both ways round.
//
// Upstream, mcpbox is the OAuth client of a remote MCP server. Discover
// follows a 401's WWW-Authenticate challenge (or the well-known URLs) to
// the protected resource metadata (RFC 9728) and the authorization
// server metadata (RFC 8414, then OpenID discovery, in the spec's
// order); a server without resource metadata (the 2025-03-26 revision)
// has its origin as authorization server, with metadata or the default
// endpoints. Login registers the client (a pre-registered id, a Client ID
// Metadata Document, or dynamic registration, RFC 7591), runs the
// authorization code flow with PKCE S256 through a one-shot listener on
// 127.0.0.1, with RFC 8707 resource indicators, and checks the state and
// the RFC 9207 iss parameter; a Silent login (prompt=none, followed
// without a person or cookies) re-authorizes where the authorization
// server allows it and fails with ErrInteractionRequired otherwise. The
// Grant it returns goes to a Store;
// FileStore seals each grant with AES-256-GCM under a key from a
// KeySource (a 0600 key file, or a cmd: provider). Transport adds the
// access token to requests for its server only, refreshes it before it
// expires, and turns a 401 or a 403 insufficient_scope into an
// Authorize call (step-up) or an *AuthRequiredError. Logout revokes
// (RFC 7009) and deletes.
//
// Downstream, the gateway is a protected resource: Validator checks JWT
// access tokens (RFC 9068) against the issuer's JWKS (cached, fetched
// again for an unknown key id at most once per RefetchGap): signature
// (RS256, ES256, EdDSA only), iss, aud (the gateway's resource URI),
// exp and nbf with a small leeway, typ at+jwt (or, with GenericType, JWT
// or none), and maps a claim to the client
// identity. MetadataHandler serves the resource metadata and
// Challenge.String builds the WWW-Authenticate header.
//
// Threats handled: a forged or replayed redirect (state, compared in
// constant time; iss mismatch or absence where advertised), a metadata
// document for another resource or issuer (mix-up), downgrade to plain
// http (only https, or http on loopback, for every endpoint and
// redirect), requests into loopback, link-local or private networks
// beyond the configured server's own (checked on the address dialed,
// guard.go), code interception (PKCE S256, required of the server), a
// token sent to another host or path (Transport's binding), a stored
// grant moved to another binding (the binding is the cipher's
// additional data), token files readable by others (0600 and owner
// checked on read), "alg": "none" and HMAC-with-public-key confusion
// (asymmetric algorithms only), JWKS refetch floods (rate limit).
//
// What it must not do: put a token, code, verifier or client secret in
// an error, a log line or a %v of a Grant; import the CLI, the gateway
// or the config (it is a mechanism; the wiring decides which server gets
// which store and key). It does not open a browser: LoginOptions.OpenURL
// receives the URL.
package oauth
