package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/launch"
	"mcpbox/internal/oauth"
	"mcpbox/internal/specconv"
	"mcpbox/internal/tcppeer"
)

// This file wires package oauth upstream: the token stores of remote
// servers with oauth, mcpbox login and logout, and the login states.
//
// The grants live in STATE_DIR/oauth/IDENTITY/, one store per client
// identity (the local user is _local, a clients: entry its name, a JWT
// client oidc.CLAIM), sealed with the key of oauth.store_key or
// STATE_DIR/oauth.key. A connection made for one identity reads only
// that identity's store, so one user's token is never sent for another.

// oauthKeys is where the sealing key of c's grants comes from.
func oauthKeys(c *config.Config, stateDir string) oauth.KeySource {
	if ref := c.OAuth.StoreKey.From; ref != "" {
		// Resolved once (every request loads the grant, and a cmd:
		// provider such as pass must not run each time); a failure is
		// tried again at the next request.
		var mu sync.Mutex
		var key []byte
		return oauth.KeyFunc(func(ctx context.Context) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			if key != nil {
				return key, nil
			}
			v, err := launch.ResolveSecret(ctx, "oauth.store_key", ref, false)
			if err != nil {
				return nil, fmt.Errorf("oauth.store_key: %w", err)
			}
			key = v.Value
			return key, nil
		})
	}
	return oauth.KeyFile(filepath.Join(stateDir, "oauth.key"))
}

// oauthIdentityDir is the store dir name of an agent: the shared scope
// uses the local user's logins.
func oauthIdentityDir(agent string) (string, error) {
	if agent == "" {
		agent = gateway.LocalAgent
	}
	if agent == "." || agent == ".." || strings.ContainsAny(agent, "/\x00") || len(agent) > 200 {
		return "", fmt.Errorf("client %q cannot have a token store", agent)
	}
	return agent, nil
}

// oauthStores returns the store of each agent, made on first use.
func oauthStores(c *config.Config, stateDir string) func(agent string) (oauth.Store, error) {
	keys := oauthKeys(c, stateDir)
	return func(agent string) (oauth.Store, error) {
		name, err := oauthIdentityDir(agent)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(stateDir, "oauth")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return &oauth.FileStore{Dir: filepath.Join(dir, name), Keys: keys}, nil
	}
}

// remoteOAuth is the OAuth wiring of remote server s, or nil without
// servers.NAME.oauth.
func (w wiring) remoteOAuth(s *config.Server) *launch.RemoteOAuth {
	if s.OAuth == nil {
		return nil
	}
	return &launch.RemoteOAuth{Name: s.Name, LoginFlags: w.loginFlags, Store: oauthStores(w.c, w.opts.StateDir), Reauthorize: w.reauthorize(s)}
}

// reauthorize is serve's silent login for s: with the configured scopes
// (and, on a step-up, the scope asked for), where the authorization
// server grants without a person; otherwise the client is told to run
// mcpbox login. A token got so is logged and audited
// (audit.EventOAuthReauthorized): no person saw it asked for.
func (w wiring) reauthorize(s *config.Server) func(context.Context, string, oauth.Store, oauth.Challenge, bool) error {
	return func(ctx context.Context, agent string, store oauth.Store, ch oauth.Challenge, step bool) error {
		lo, err := reauthOptions(ctx, s, store, ch, step)
		if err != nil {
			return err
		}
		g, err := oauth.Login(ctx, lo)
		if err != nil {
			return err
		}
		client := cmp.Or(agent, gateway.LocalAgent)
		if w.log != nil {
			w.log.Info("oauth: re-authorized without a person", "server", s.Name, "client", client,
				"issuer", g.Issuer, "scope", g.Scope, "step_up", step)
		}
		if w.guard != nil {
			w.guard.Record(audit.Record{Event: audit.EventOAuthReauthorized, Server: s.Name, Client: client,
				Detail: map[string]string{"issuer": g.Issuer, "scope": g.Scope, "step_up": strconv.FormatBool(step)}})
		}
		return nil
	}
}

// reauthOptions are the options of serve's silent login for s: a
// step-up asks for the configured scopes and the challenge's (which
// holds the granted scope and the one asked for). The login may ask for
// no scope beyond the held one, oauth.scopes and oauth.step_up_scopes
// (oauth.LoginOptions.SilentScopes): a person decides on any other.
func reauthOptions(ctx context.Context, s *config.Server, store oauth.Store, ch oauth.Challenge, step bool) (oauth.LoginOptions, error) {
	lo, err := loginOptions(ctx, s)
	if err != nil {
		return lo, err
	}
	lo.Store, lo.Challenge, lo.Silent, lo.Wait = store, ch, true, 30*time.Second
	lo.SilentScopes = union(s.OAuth.Scopes, s.OAuth.StepUpScopes)
	if step && len(lo.Scopes) > 0 {
		lo.Scopes = union(lo.Scopes, strings.Fields(ch.Scope))
	}
	return lo, nil
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// loginOptions are the oauth.LoginOptions of s's settings, its client
// id and secret resolved.
func loginOptions(ctx context.Context, s *config.Server) (oauth.LoginOptions, error) {
	lo := oauth.LoginOptions{
		Server: s.URL, Scopes: s.OAuth.Scopes, Issuer: s.OAuth.Issuer,
		ClientMetadataURL: s.OAuth.ClientMetadataURL, RedirectPort: s.OAuth.RedirectPort,
		RedirectPeer: tcppeer.SameUser,
	}
	for _, r := range []struct {
		t   config.Token
		dst *string
		key string
	}{{s.OAuth.ClientID, &lo.ClientID, "client_id"}, {s.OAuth.ClientSecret, &lo.ClientSecret, "client_secret"}} {
		if r.t.From == "" {
			continue
		}
		v, err := launch.ResolveSecret(ctx, r.key, r.t.From, false)
		if err != nil {
			return lo, fmt.Errorf("servers.%s.oauth.%s: %w", s.Name, r.key, err)
		}
		*r.dst = string(v.Value)
	}
	if lo.ClientSecret != "" && lo.Issuer == "" {
		// config.Load refuses it too; a secret must never go to an
		// authorization server the remote server picks.
		return lo, fmt.Errorf("servers.%s.oauth.client_secret: needs issuer (the authorization server the client is registered at)", s.Name)
	}
	return lo, nil
}

// LoginOptions are the arguments of mcpbox login and logout.
type LoginOptions struct {
	Config     *config.Config
	ConfigPath string // "" for the embedded default
	Base       string // relative paths of the config are against it
	StateDir   string // --state-dir; "": the config's
	Server     string // the remote server's name
	// Client is the identity whose token it is; "": the local user
	// (stdio, the local token). A clients: name, or oidc.CLAIM for a JWT
	// client, logs in for that client.
	Client string
	// NoBrowser only prints the authorization URL; otherwise a browser is
	// opened too where xdg-open exists.
	NoBrowser bool
	// Scopes, if set, are asked for instead of servers.NAME.oauth.scopes
	// (login --scope: the scope a step-up error names).
	Scopes []string
	// Stdout gets the authorization URL as its first line; Stderr the
	// messages. Neither ever gets a token.
	Stdout, Stderr io.Writer
}

// loginTarget finds the server and its identity's store.
func (o LoginOptions) loginTarget() (*config.Server, oauth.Store, error) {
	s := o.Config.Server(o.Server)
	switch {
	case s == nil:
		return nil, nil, configError(fmt.Errorf("no server %q in the config", o.Server))
	case s.URL == "":
		return nil, nil, configError(fmt.Errorf("server %s is not a remote server (url)", o.Server))
	case s.OAuth == nil:
		return nil, nil, configError(fmt.Errorf("server %s has no oauth settings: add `oauth: {}` to servers.%s", o.Server, o.Server))
	}
	dir, err := specconv.StateDir(o.Config, o.ConfigPath, o.Base, o.StateDir)
	if err != nil {
		return nil, nil, err
	}
	if err := guard.StateDirOwned(dir); err != nil {
		return nil, nil, err
	}
	agent := o.Client
	if agent == "" {
		agent = gateway.LocalAgent
	}
	store, err := oauthStores(o.Config, dir)(agent)
	return s, store, err
}

// knownIdentity checks that a login's --client names an identity serve
// can give a session of c: the local user (""), a configured client, or
// with listen.http.oauth an "oidc." one. A login for any other would
// never be used. (Logout takes any: a client removed since still has
// its tokens.)
func knownIdentity(c *config.Config, client string) error {
	if client == "" || client == gateway.LocalAgent || slices.ContainsFunc(c.Clients, func(cl config.Client) bool { return cl.Name == client }) {
		return nil
	}
	oidc := c.Listen.HTTP.OAuth != nil
	if oidc && strings.HasPrefix(client, jwtIdentityPrefix) && len(client) > len(jwtIdentityPrefix) {
		return nil
	}
	var names []string
	for _, cl := range c.Clients {
		names = append(names, cl.Name)
	}
	known := "the local user (no --client)"
	if len(names) > 0 {
		known += ", " + strings.Join(names, ", ")
	}
	if oidc {
		known += " or " + jwtIdentityPrefix + "CLAIM (listen.http.oauth)"
	}
	return fmt.Errorf("--client %q is no client identity of this config, so its login would never be used: the identities are %s", client, known)
}

// Login runs the authorization of a remote server (mcpbox login): it
// prints the authorization URL as the first line of o.Stdout, opens a
// browser unless o.NoBrowser, waits for the redirect on its loopback
// listener and stores the tokens.
func Login(ctx context.Context, o LoginOptions) error {
	if err := knownIdentity(o.Config, o.Client); err != nil {
		return configError(err)
	}
	s, store, err := o.loginTarget()
	if err != nil {
		return err
	}
	lo, err := loginOptions(ctx, s)
	if err != nil {
		return err
	}
	if len(o.Scopes) > 0 {
		lo.Scopes = o.Scopes
	}
	lo.Store = store
	lo.OpenURL = func(u string) error {
		if _, err := fmt.Fprintln(o.Stdout, u); err != nil {
			return err
		}
		if !o.NoBrowser {
			openBrowser(u)
		}
		fmt.Fprintf(o.Stderr, "mcpbox: waiting for the authorization of %s in the browser (the URL above)\n", s.Name)
		return nil
	}
	g, err := oauth.Login(ctx, lo)
	if err != nil {
		return fmt.Errorf("login to %s: %w", s.Name, err)
	}
	fmt.Fprintf(o.Stderr, "mcpbox: logged in to %s (issuer %s)\n", s.Name, g.Issuer)
	return nil
}

// openBrowser opens u with xdg-open (macOS: open), if there is one; the
// URL is printed anyway, so a failure only means the user copies it.
func openBrowser(u string) {
	opener := "xdg-open"
	if goos == "darwin" {
		opener = "open"
	}
	p, err := exec.LookPath(opener)
	if err != nil {
		return
	}
	cmd := exec.Command(p, u)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

// Logout revokes a remote server's tokens where its authorization server
// allows it and deletes them (mcpbox logout).
func Logout(ctx context.Context, o LoginOptions) error {
	s, store, err := o.loginTarget()
	if err != nil {
		return err
	}
	revoked, err := oauth.Logout(ctx, nil, store, s.URL)
	switch {
	case errors.Is(err, oauth.ErrNoToken):
		fmt.Fprintf(o.Stderr, "mcpbox: not logged in to %s\n", s.Name)
		return nil
	case errors.Is(err, oauth.ErrTokenKept):
		return fmt.Errorf("logout from %s: %w; run mcpbox logout again once they can be read, to revoke them", s.Name, err)
	case err != nil:
		return fmt.Errorf("logout from %s: %w (the stored tokens are deleted)", s.Name, err)
	case revoked:
		fmt.Fprintf(o.Stderr, "mcpbox: logged out of %s: tokens revoked and deleted\n", s.Name)
	default:
		fmt.Fprintf(o.Stderr, "mcpbox: logged out of %s: tokens deleted (the authorization server offers no revocation)\n", s.Name)
	}
	return nil
}

// LoginState is one stored login, without its tokens.
type LoginState struct {
	Server   string // the config's name for it
	Client   string // the identity: _local, a client name, oidc.CLAIM
	Issuer   string
	ClientID string
	oauth.Status
	State string // LoginSummary's words for it
}

// LoginStates lists the logins stored in stateDir for the remote servers
// of c with oauth; it reads only the bindings, never a token.
func LoginStates(c *config.Config, stateDir string) ([]LoginState, error) {
	names := map[string]string{}
	for _, s := range c.Servers {
		if s.OAuth != nil && s.URL != "" {
			names[s.URL] = s.Name
		}
	}
	ents, err := os.ReadDir(filepath.Join(stateDir, "oauth"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []LoginState
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		st := &oauth.FileStore{Dir: filepath.Join(stateDir, "oauth", e.Name())}
		ls, err := st.Logins()
		if err != nil {
			return nil, err
		}
		for _, b := range ls {
			if n, ok := names[b.Server]; ok {
				out = append(out, LoginState{Server: n, Client: e.Name(), Issuer: b.Issuer, ClientID: b.ClientID, Status: b.Status})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Server+"\x00"+out[i].Client < out[j].Server+"\x00"+out[j].Client
	})
	return out, nil
}

// LoginSummary is a line per remote server of c with oauth and per
// identity logged in to it, for `mcpbox secrets` and `mcpbox login
// --status`: the server's name and "logged in (IDENTITY, issuer ISSUER)"
// with when the token expires, "needs login (...)" for an expired token
// without a refresh token, or "not logged in"; never a token. stateFlag
// is --state-dir ("": the config's).
func LoginSummary(c *config.Config, configPath, stateFlag string) []LoginState {
	var out []LoginState
	if !slices.ContainsFunc(c.Servers, func(s *config.Server) bool { return s.OAuth != nil && s.URL != "" }) {
		return nil // and no state dir is made for a listing
	}
	dir, err := specconv.StateDir(c, configPath, filepath.Dir(configPath), stateFlag)
	var states []LoginState
	if err == nil {
		states, err = LoginStates(c, dir)
	}
	for _, s := range c.Servers {
		if s.OAuth == nil || s.URL == "" {
			continue
		}
		n := len(out)
		for _, st := range states {
			if st.Server == s.Name {
				st.State = loginWords(st, time.Now(), configPath, stateFlag)
				out = append(out, st)
			}
		}
		if len(out) == n {
			st := LoginState{Server: s.Name, State: "not logged in"}
			if err != nil {
				st.State = "login state unknown: " + err.Error()
			}
			out = append(out, st)
		}
	}
	return out
}

// loginWords says what a stored login is worth at now; the login it
// asks for names the config (and state dir) it was read from: run where
// the person reads it, a bare `mcpbox login NAME` finds the project's
// config or the embedded default, maybe not this one.
func loginWords(st LoginState, now time.Time, configPath, stateFlag string) string {
	what := fmt.Sprintf("logged in (%s, issuer %s)", st.Client, st.Issuer)
	switch {
	case st.Expiry.IsZero():
	case st.Expiry.After(now):
		what += ", expires " + st.Expiry.UTC().Format(time.RFC3339)
	case st.Refreshable:
		what += ", expired " + st.Expiry.UTC().Format(time.RFC3339) + ", refreshed at next use"
	default:
		flags := loginFlags(configPath, stateFlag, "")
		if st.Client != gateway.LocalAgent {
			flags += loginFlags("", "", st.Client)
		}
		what = fmt.Sprintf("needs login (%s, issuer %s, expired %s): run `mcpbox login %s%s`", st.Client, st.Issuer, st.Expiry.UTC().Format(time.RFC3339), st.Server, flags)
	}
	return what
}

// loginWarnings are the start's warnings of each remote server with
// oauth that nobody has logged in to yet: its sessions would fail until
// `mcpbox login SERVER`. They are among the summary's warnings, which
// said "no warnings" below them when they were logged apart.
func (d *daemon) loginWarnings() config.Errors {
	states, err := LoginStates(d.c, d.dir)
	if err != nil {
		return config.Errors{&config.Error{File: d.c.File, Msg: fmt.Sprintf("reading the OAuth logins: %v", err)}}
	}
	var ws config.Errors
	for _, s := range d.c.Servers {
		if s.OAuth == nil || s.URL == "" || slices.ContainsFunc(states, func(l LoginState) bool { return l.Server == s.Name }) {
			continue
		}
		pos := s.Meta.At("oauth")
		ws = append(ws, &config.Error{File: d.c.File, Line: pos.Line, Col: pos.Col,
			Msg: fmt.Sprintf("servers.%s.oauth: server %s is not logged in: run `mcpbox login %s%s` before using it", s.Name, s.Name, s.Name, loginFlags(d.o.ConfigPath, d.o.StateDir, ""))})
	}
	return ws
}

// loginFlags is what follows `mcpbox login NAME` in a hint to log in
// for this gateway: for the local user (agent "" or the local agent),
// " --config PATH" (absolute) and " --state-dir DIR" (serve's flag, if
// given): serve's stderr and a client's error are often read far from
// the project, where a bare `mcpbox login NAME` would find the embedded
// default. For another client identity, only " --client NAME": its error
// goes to a client that may be another user's or another host's, which
// this host's paths are none of; the gateway's operator runs the login.
func loginFlags(configPath, stateDir, agent string) string {
	if agent != "" && agent != gateway.LocalAgent {
		return " --client " + launch.ShellWord(agent)
	}
	var b strings.Builder
	for _, f := range []struct{ flag, path string }{{"--config", configPath}, {"--state-dir", stateDir}} {
		if f.path == "" {
			continue
		}
		if abs, err := filepath.Abs(f.path); err == nil {
			f.path = abs
		}
		b.WriteString(" " + f.flag + " " + launch.ShellWord(f.path))
	}
	return b.String()
}
