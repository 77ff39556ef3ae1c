package oauth

import (
	"context"
	"errors"
	"testing"
)

// TestLoginSilentKeepsClientSecretsIssuer: a silent login with a
// pre-registered client secret and no configured issuer goes only to the
// authorization server of the login it renews. A server that now names
// another one (its own) would otherwise have the gateway, with no person
// to see it, send the secret (client authentication at the token
// endpoint) there.
func TestLoginSilentKeepsClientSecretsIssuer(t *testing.T) {
	const secret = "legit-client-s3cret"
	client := testClient{method: AuthSecretBasic, secret: secret, redirectURIs: []string{"http://127.0.0.1/callback"}}
	legit := newTestAS(t, func(a *testAS) { a.clients["conf"] = client })
	// The other authorization server accepts the client as the legit one
	// does: a token from it proves the secret reached it.
	other := newTestAS(t, func(a *testAS) { a.clients["conf"] = client })
	rs := newTestRS(t, other, nil)
	store := testStore(t)
	if err := store.Save(context.Background(), &Grant{Server: rs.url, Issuer: legit.issuer, Resource: rs.url,
		ClientID: "conf", ClientSecret: secret, AuthMethod: AuthSecretBasic, AccessToken: "old-token-0123456789"}); err != nil {
		t.Fatal(err)
	}
	_, err := login(t, other, rs, store, func(o *LoginOptions) {
		o.OpenURL, o.Silent, o.ClientID, o.ClientSecret = nil, true, "conf", secret
	})
	if !errors.Is(err, ErrIssuerMismatch) {
		t.Errorf("silent login at another authorization server: %v, want ErrIssuerMismatch", err)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if n := len(other.tokenRequests); n != 0 {
		t.Errorf("the other authorization server got %d token requests with the client's secret", n)
	}
	// Interactive or not, a login that renews at the same one works.
	rs2 := newTestRS(t, legit, nil)
	if err := store.Save(context.Background(), &Grant{Server: rs2.url, Issuer: legit.issuer, Resource: rs2.url,
		ClientID: "conf", ClientSecret: secret, AuthMethod: AuthSecretBasic, AccessToken: "old-token-0123456789"}); err != nil {
		t.Fatal(err)
	}
	if _, err := login(t, legit, rs2, store, func(o *LoginOptions) {
		o.OpenURL, o.Silent, o.ClientID, o.ClientSecret = nil, true, "conf", secret
	}); err != nil {
		t.Errorf("silent login at the same authorization server: %v", err)
	}
}
