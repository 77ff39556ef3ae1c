package oauth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSilentStepUpScopeBound: a server that asks (403 insufficient_scope)
// for a scope neither held nor allowed gets no silent authorization with
// it, even from an authorization server that grants without a person;
// an allowed one is still granted silently.
func TestSilentStepUpScopeBound(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, func(r *testRS) { r.chScope = "mcp:read" })
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatalf("interactive login: %v", err)
	}
	rs.setNeedScope("admin")
	transport := func(allowed []string) *Transport {
		return &Transport{Server: rs.url, Store: store, Authorize: func(ctx context.Context, ch Challenge, step bool) error {
			_, err := Login(ctx, LoginOptions{Server: rs.url, Challenge: ch, Silent: true, Store: store, Wait: 10 * time.Second, SilentScopes: allowed})
			return err
		}}
	}
	authz := func() int {
		as.mu.Lock()
		defer as.mu.Unlock()
		return len(as.authzRequests)
	}
	before := authz()
	_, _, err := call(t, transport([]string{"mcp:write"}), rs.url)
	var ae *AuthRequiredError
	if !errors.As(err, &ae) || !ae.StepUp || !errors.Is(err, ErrScopeNotAllowed) || !errors.Is(err, ErrInteractionRequired) {
		t.Fatalf("step-up to an unlisted scope: %v, want an AuthRequiredError with ErrScopeNotAllowed", err)
	}
	if n := authz() - before; n != 0 {
		t.Errorf("the authorization server got %d silent requests for the unlisted scope", n)
	}
	if g, err := store.Load(context.Background(), rs.url); err != nil || slices.Contains(strings.Fields(g.Scope), "admin") {
		t.Errorf("stored grant after the refused step-up: scope %q, %v", g.Scope, err)
	}
	status, body, err := call(t, transport([]string{"admin"}), rs.url)
	if err != nil || status != 200 || !strings.Contains(body, "admin") {
		t.Fatalf("step-up to a listed scope: %d %q %v, want 200 with admin", status, body, err)
	}
	if q := as.lastAuthz(t); q.Get("prompt") != "none" || !slices.Contains(strings.Fields(q.Get("scope")), "mcp:read") {
		t.Errorf("silent step-up asked prompt %q scope %q, want none and the held mcp:read with admin", q.Get("prompt"), q.Get("scope"))
	}
}
