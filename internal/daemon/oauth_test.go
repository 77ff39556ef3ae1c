package daemon

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/oauth"
	"mcpbox/internal/specconv"
)

func loadTestConfig(t *testing.T, y string) *config.Config {
	t.Helper()
	c, err := config.Load("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLoginRefusesWhatItCannotLogInTo: an unknown server, a local one and
// a remote one without oauth are config errors that say what to do.
func TestLoginRefusesWhatItCannotLogInTo(t *testing.T) {
	dir := t.TempDir()
	c := loadTestConfig(t, "version: 1\nstate_dir: "+dir+"\nservers:\n  loc: {command: [x]}\n  plain: {url: https://mcp.example.com/mcp}\n")
	for server, want := range map[string]string{
		"nope":  `no server "nope"`,
		"loc":   "not a remote server",
		"plain": "add `oauth: {}` to servers.plain",
	} {
		for _, f := range []func(context.Context, LoginOptions) error{Login, Logout} {
			var out, errb bytes.Buffer
			err := f(context.Background(), LoginOptions{Config: c, Base: dir, Server: server, Stdout: &out, Stderr: &errb})
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want a ConfigError with %q", server, err, want)
			}
			if out.Len() != 0 {
				t.Errorf("%s: stdout %q", server, out.String())
			}
		}
	}
}

// TestLoginOptionsSecretNeedsIssuer: a client secret is never handed to
// a login without a pinned issuer, even for a config built in code.
func TestLoginOptionsSecretNeedsIssuer(t *testing.T) {
	t.Setenv("OAUTHFIX_SECRET", "s3cret-value")
	s := &config.Server{Name: "r", URL: "https://mcp.example.com/mcp", OAuth: &config.ServerOAuth{
		ClientID: config.Token{From: "env:OAUTHFIX_SECRET"}, ClientSecret: config.Token{From: "env:OAUTHFIX_SECRET"}}}
	if _, err := loginOptions(context.Background(), s); err == nil || !strings.Contains(err.Error(), "servers.r.oauth.client_secret: needs issuer") {
		t.Errorf("secret without issuer: %v, want refused", err)
	}
	s.OAuth.Issuer = "https://sso.example.com"
	if lo, err := loginOptions(context.Background(), s); err != nil || lo.ClientSecret != "s3cret-value" || lo.Issuer != s.OAuth.Issuer {
		t.Errorf("secret with issuer: %v", err)
	}
}

// TestOAuthStoresPerIdentity: each identity's store is its own dir, and
// names that are no single dir name get none.
func TestOAuthStoresPerIdentity(t *testing.T) {
	dir := t.TempDir()
	c := loadTestConfig(t, "version: 1\nservers:\n  r: {url: https://mcp.example.com/mcp, oauth: {}}\n")
	stores := oauthStores(c, dir)
	ctx := context.Background()
	for _, agent := range []string{"", "_local", "carol", "oidc.alice@example.com"} {
		s, err := stores(agent)
		if err != nil {
			t.Fatalf("%q: %v", agent, err)
		}
		want := agent
		if want == "" {
			want = "_local"
		}
		if got := s.(*oauth.FileStore).Dir; got != filepath.Join(dir, "oauth", want) {
			t.Errorf("%q: store %s", agent, got)
		}
	}
	for _, agent := range []string{"..", ".", "a/b", "../x"} {
		if _, err := stores(agent); err == nil {
			t.Errorf("%q got a store", agent)
		}
	}
	// A grant saved for alice is not there for bob, and LoginStates
	// names whose it is.
	a, _ := stores("oidc.alice")
	g := &oauth.Grant{Server: "https://mcp.example.com/mcp", Issuer: "https://as.example.com", Resource: "https://mcp.example.com/mcp", ClientID: "cid", AccessToken: "at-secret-0123456789"}
	if err := a.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	b, _ := stores("oidc.bob")
	if _, err := b.Load(ctx, g.Server); !errors.Is(err, oauth.ErrNoToken) {
		t.Errorf("bob's store: %v, want ErrNoToken", err)
	}
	states, err := LoginStates(c, dir)
	if err != nil || len(states) != 1 || states[0].Client != "oidc.alice" || states[0].Server != "r" || states[0].Issuer != g.Issuer {
		t.Errorf("LoginStates = %+v, %v", states, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "oauth.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", fi, err)
	}
}

// TestStoreKeyResolvedOnce: a cmd: store key runs once however many
// grants are read (serve reads the grant at every request).
func TestStoreKeyResolvedOnce(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	script := filepath.Join(dir, "key.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho x >> "+count+"\necho 0123456789abcdef0123456789abcdef-random-key\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	c := loadTestConfig(t, "version: 1\noauth: {store_key: {from: \"cmd:"+script+"\"}}\nservers:\n  r: {url: https://mcp.example.com/mcp, oauth: {}}\n")
	s, err := oauthStores(c, dir)("_local")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g := &oauth.Grant{Server: "https://mcp.example.com/mcp", Issuer: "https://as.example.com", Resource: "https://mcp.example.com/mcp", ClientID: "cid", AccessToken: "at-secret-0123456789"}
	if err := s.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if got, err := s.Load(ctx, g.Server); err != nil || got.AccessToken != g.AccessToken {
			t.Fatalf("Load: %v, %v", got, err)
		}
	}
	if b, _ := os.ReadFile(count); strings.Count(string(b), "x") != 1 {
		t.Errorf("the key command ran %d times, want 1", strings.Count(string(b), "x"))
	}
	if _, err := os.Stat(filepath.Join(dir, "oauth.key")); !os.IsNotExist(err) {
		t.Errorf("a key file was made although store_key is set: %v", err)
	}
}

// TestLoginWords: the login state says when the token expires and when a
// new login is needed, and never holds more than the binding.
func TestLoginWords(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base := LoginState{Server: "lin", Client: "_local", Issuer: "https://as.example"}
	for _, c := range []struct {
		expiry      time.Time
		refreshable bool
		want        string
	}{
		{time.Time{}, false, "logged in (_local, issuer https://as.example)"},
		{now.Add(time.Hour), false, "logged in (_local, issuer https://as.example), expires 2026-12-01T13:00:00Z"},
		{now.Add(-time.Hour), true, "logged in (_local, issuer https://as.example), expired 2026-12-01T11:00:00Z, refreshed at next use"},
		{now.Add(-time.Hour), false, "needs login (_local, issuer https://as.example, expired 2026-12-01T11:00:00Z): run `mcpbox login lin --config /p/mcpbox.yaml`"},
	} {
		st := base
		st.Expiry, st.Refreshable = c.expiry, c.refreshable
		if got := loginWords(st, now, "/p/mcpbox.yaml", ""); got != c.want {
			t.Errorf("expiry %v refreshable %v: %q, want %q", c.expiry, c.refreshable, got, c.want)
		}
	}
	// Another identity's login is that identity's to redo, with the
	// config's (the operator runs it here).
	alice := base
	alice.Client, alice.Expiry = "alice", now.Add(-time.Hour)
	if got, want := loginWords(alice, now, "/p/mcpbox.yaml", "/s"), "run `mcpbox login lin --config /p/mcpbox.yaml --state-dir /s --client alice`"; !strings.HasSuffix(got, want) {
		t.Errorf("an expired login of alice: %q, want it to end %q", got, want)
	}
}

// TestReauthOptions: serve's re-authorization is silent, takes the
// server's challenge, and on a step-up adds the scope asked for to the
// configured scopes (without it, the challenge's scope is used as is).
func TestReauthOptions(t *testing.T) {
	ctx := context.Background()
	s := &config.Server{Name: "r", URL: "https://mcp.example.com/mcp", OAuth: &config.ServerOAuth{Scopes: []string{"read"}}}
	ch := oauth.Challenge{Scope: "read admin", Error: "insufficient_scope"}
	lo, err := reauthOptions(ctx, s, nil, ch, true)
	if err != nil || !lo.Silent || lo.OpenURL != nil || lo.Challenge != ch || strings.Join(lo.Scopes, " ") != "read admin" {
		t.Errorf("step-up options %+v, %v; want silent, the challenge, scopes read admin", lo, err)
	}
	if lo, _ := reauthOptions(ctx, s, nil, oauth.Challenge{Scope: "other"}, false); strings.Join(lo.Scopes, " ") != "read" {
		t.Errorf("401 options scopes %q, want the configured ones", lo.Scopes)
	}
	if strings.Join(lo.SilentScopes, " ") != "read" {
		t.Errorf("silent bound %q, want the configured scopes only", lo.SilentScopes)
	}
	s.OAuth.Scopes, s.OAuth.StepUpScopes = nil, []string{"write"}
	if lo, _ := reauthOptions(ctx, s, nil, ch, true); lo.Scopes != nil || strings.Join(lo.SilentScopes, " ") != "write" {
		t.Errorf("unconfigured scopes %q, bound %q; want none (the challenge's scope is used) bounded by step_up_scopes", lo.Scopes, lo.SilentScopes)
	}
}

// TestLoginFlags: the command a login hint names reaches the gateway's
// config and its --state-dir for the local user, the token store of
// another client identity (and no host path), and pastes into a shell as
// it is.
func TestLoginFlags(t *testing.T) {
	for _, tt := range []struct {
		config, stateDir, agent, want string
	}{
		{"", "", "", ""},
		{"", "", gateway.LocalAgent, ""},
		{"/p/mcpbox.yaml", "", "", " --config /p/mcpbox.yaml"},
		{"/p/mcpbox.yaml", "/s", "", " --config /p/mcpbox.yaml --state-dir /s"},
		{"/my project/mcpbox.yaml", "", "", ` --config '/my project/mcpbox.yaml'`},
		// Another identity's client is told no host path.
		{"/p/mcpbox.yaml", "/s", "alice", " --client alice"},
		{"/p/mcpbox.yaml", "", "o'hara $(x)", ` --client 'o'\''hara $(x)'`},
	} {
		if got := loginFlags(tt.config, tt.stateDir, tt.agent); got != tt.want {
			t.Errorf("loginFlags(%q, %q, %q) = %q, want %q", tt.config, tt.stateDir, tt.agent, got, tt.want)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := loginFlags("mcpbox.yaml", "", ""), " --config "+filepath.Join(wd, "mcpbox.yaml"); got != want {
		t.Errorf("a relative config: %q, want %q", got, want)
	}
}

// TestListerStateDirFlag: pin's and update's login hint names
// --state-dir when the state dir was given as one, not when the config
// alone finds it.
func TestListerStateDirFlag(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "mcpbox.yaml")
	src := []byte("version: 1\nsandbox: {require: [userns]}\nservers:\n  s: {command: [x], tools: {allow: ['*']}}\n")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, src)
	if err != nil {
		t.Fatal(err)
	}
	own, err := specconv.StateDir(c, path, base, "")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "elsewhere")
	for dir, want := range map[string]string{own: "", other: other} {
		o := ListOptions{Config: c, ConfigPath: path, Base: base, StateDir: dir}
		if got := o.stateDirFlag(); got != want {
			t.Errorf("state dir %s: flag %q, want %q", dir, got, want)
		}
	}
}
