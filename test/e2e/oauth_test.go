package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oaConfig writes a config (JSON is YAML) in a dir of m's user and
// returns its path and the state dir.
func oaConfig(t *testing.T, m mode, cfg map[string]any) (string, string) {
	t.Helper()
	dir := gwDir(t, m)
	state := filepath.Join(dir, "state")
	cfg["version"] = 1
	cfg["state_dir"] = state
	if !m.root() {
		cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, path, string(b), 0o644)
	return path, state
}

// oaLogin runs `mcpbox login SERVER --no-browser` and plays the browser:
// it reads the authorization URL from the first line of stdout and
// follows it (the test AS approves at once and redirects to the login's
// loopback listener). It returns how login ended.
func oaLogin(t *testing.T, m mode, cfg, server string, extra ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := m.command(ctx, append([]string{"login", server, "--no-browser", "--config", cfg}, extra...)...)
	var errb lockedBuffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(out)
	first, err := br.ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("login printed no URL line: %v\nstderr:\n%s", err, errb.String())
	}
	authURL := strings.TrimSpace(first)
	if !strings.HasPrefix(authURL, "http://127.0.0.1:") || !strings.Contains(authURL, "/authorize?") {
		t.Errorf("first line of stdout %q is not the authorization URL", first)
	}
	resp, err := http.Get(authURL) // follows the redirect to the callback
	if err != nil {
		t.Errorf("following the authorization URL: %v", err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("the login's callback answered %d", resp.StatusCode)
		}
	}
	rest, _ := io.ReadAll(br)
	err = cmd.Wait()
	r := result{stdout: first + string(rest), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("login: %v", err)
	}
	return r
}

// oaServeStdio starts `mcpbox serve --stdio --config cfg` as an MCP
// client's command.
func oaServeStdio(t *testing.T, m mode, cfg string) (*mcp.ClientSession, *gwLog) {
	t.Helper()
	sess, logs, err := oaServeStdioErr(t, m, cfg)
	if err != nil {
		t.Fatalf("connecting to mcpbox serve: %v\nstderr:\n%s", err, logs)
	}
	return sess, logs
}

// oaServeStdioErr is oaServeStdio that returns the connection's error.
func oaServeStdioErr(t *testing.T, m mode, cfg string) (*mcp.ClientSession, *gwLog, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := m.command(ctx, append(append([]string{"serve", "--stdio"}, m.flags...), "--config", cfg)...)
	logs := newGWLog()
	cmd.Stderr = logs
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "oauth-e2e", Version: "1"}, nil)
	sess, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		cancel()
		gwReap(cmd)
		return nil, logs, err
	}
	t.Cleanup(func() {
		gwClose(t, sess)
		cancel()
		gwReap(cmd)
		if t.Failed() {
			t.Logf("mcpbox serve stderr:\n%s", logs)
		}
	})
	return sess, logs, nil
}

// oaNeedsLogin fails unless serve refuses to start r for want of a
// login, telling the client to run mcpbox login r: the session fails
// (r is its only server) or the call does.
func oaNeedsLogin(t *testing.T, ctx context.Context, m mode, cfg, when string) {
	t.Helper()
	sess, logs, err := oaServeStdioErr(t, m, cfg)
	if err == nil {
		var out string
		out, err = gwCall(ctx, sess, "whoami", nil)
		if err == nil {
			t.Fatalf("%s: whoami gave %q, want an error", when, out)
		}
	}
	if !strings.Contains(err.Error(), "needs authorization: run `mcpbox login r --config "+cfg+"`") {
		t.Errorf("%s: %v; want an error naming `mcpbox login r`\n%s", when, err, logs)
	}
	if !strings.Contains(logs.String(), "server r is not logged in: run `mcpbox login r --config "+cfg+"` before using it") {
		t.Errorf("%s: serve did not warn about the missing login at start:\n%s", when, logs)
	}
	if strings.Contains(logs.String(), "no warnings") {
		t.Errorf("%s: the start-up summary says no warnings below the missing login's:\n%s", when, logs)
	}
}

// oaNoToken fails if any token appears in data (raw, or base64 of it).
func oaNoToken(t *testing.T, where string, data []byte, tokens []string) {
	t.Helper()
	for _, tok := range tokens {
		for _, form := range []string{tok, base64.StdEncoding.EncodeToString([]byte(tok)), base64.RawURLEncoding.EncodeToString([]byte(tok))} {
			if bytes.Contains(data, []byte(form)) {
				t.Errorf("%s holds a token (%.12s...)", where, tok)
			}
		}
	}
}

// TestOAuthRemoteLogin: a remote server that needs OAuth. Before login,
// serve's calls fail with a message naming mcpbox login; login
// --no-browser prints the URL first and exits 0 once the tokens are
// stored; serve then calls the server with the token, which never shows
// in a tool result, serve's or login's output, the audit log or the
// state dir in plaintext; logout revokes and deletes.
func TestOAuthRemoteLogin(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		as := newOAAS(t)
		rs := newOARS(t, as)
		cfg, state := oaConfig(t, m, map[string]any{"servers": map[string]any{
			"r": map[string]any{"url": rs.url, "oauth": map[string]any{}, "tools": map[string]any{"allow": []string{"*"}}},
		}})
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()

		oaNeedsLogin(t, ctx, m, cfg, "before login")
		want(t, m.mcpbox(t, 60*time.Second, "", "secrets", "--config", cfg), 0, "oauth  mcpbox login  not logged in")

		lr := oaLogin(t, m, cfg, "r")
		if lr.code != 0 || !strings.Contains(lr.stderr, "logged in to r") {
			t.Fatalf("login:\n%s", lr)
		}
		if n := strings.Count(strings.TrimSpace(lr.stdout), "\n"); n != 0 {
			t.Errorf("login printed more than the URL on stdout:\n%s", lr.stdout)
		}

		sr := m.mcpbox(t, 60*time.Second, "", "secrets", "--json", "--config", cfg)
		want(t, sr, 0, `"id":"r/oauth"`, `"as":"logged in (_local, issuer `+as.issuer+`), expires `)
		st := m.mcpbox(t, 60*time.Second, "", "login", "--status", "--config", cfg)
		want(t, st, 0, "r\tlogged in (_local, issuer "+as.issuer+"), expires 20")

		sess, logs := oaServeStdio(t, m, cfg)
		if strings.Contains(logs.String(), "not logged in") {
			t.Errorf("serve warned about a login that exists:\n%s", logs)
		}
		gwMustCall(t, sess, "whoami", nil, "user alice")
		leak, err := gwCall(ctx, sess, "leak", nil)
		if err != nil || !strings.Contains(leak, "your token is [REDACTED") {
			t.Errorf("leak gave %q, %v; want the token redacted", leak, err)
		}
		// A step-up that needs a person: serve's silent re-authorization
		// gets login_required, and the client is told the command.
		as.needPerson()
		if out, err := gwCall(ctx, sess, "admin_only", nil); err == nil || !strings.Contains(err.Error(), "server r needs more scope: run `mcpbox login r --config "+cfg+" --scope admin`") {
			t.Errorf("admin_only gave %q, %v; want the step-up error naming mcpbox login r --scope", out, err)
		}
		gwClose(t, sess)
		// The command the error names gets the scope.
		if lr := oaLogin(t, m, cfg, "r", "--scope", "admin"); lr.code != 0 {
			t.Fatalf("login --scope:\n%s", lr)
		}
		sess, _ = oaServeStdio(t, m, cfg)
		gwMustCall(t, sess, "admin_only", nil, "admin ok")
		gwClose(t, sess)

		issued, _ := as.tokens()
		if len(issued) < 2 {
			t.Fatalf("the AS issued %d tokens, want an access and a refresh token", len(issued))
		}
		oaNoToken(t, "a tool result", []byte(leak), issued)
		oaNoToken(t, "login's output", []byte(lr.stdout+lr.stderr), issued)
		oaNoToken(t, "mcpbox secrets", []byte(sr.stdout+sr.stderr), issued)
		oaNoToken(t, "serve's stderr", []byte(logs.String()), issued)
		lg := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", cfg)
		if lg.code != 0 || !strings.Contains(lg.stdout, `"leak"`) {
			t.Errorf("mcpbox logs --json:\n%s", lg)
		}
		oaNoToken(t, "the audit log", []byte(lg.stdout), issued)
		grants := 0
		filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("reading %s: %v", p, err)
				return nil
			}
			oaNoToken(t, p, b, issued)
			if strings.HasSuffix(p, ".grant") {
				grants++
				if fi, _ := d.Info(); fi.Mode().Perm() != 0o600 {
					t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
				}
			}
			return nil
		})
		if grants != 1 {
			t.Errorf("%d grant files in the state dir, want 1", grants)
		}

		out := m.mcpbox(t, 60*time.Second, "", "logout", "r", "--config", cfg)
		if out.code != 0 || !strings.Contains(out.stderr, "revoked") {
			t.Fatalf("logout:\n%s", out)
		}
		issued, revoked := as.tokens()
		if len(revoked) == 0 {
			t.Fatal("logout revoked nothing at the AS")
		}
		for _, r := range revoked {
			found := false
			for _, i := range issued {
				found = found || r == i
			}
			if !found {
				t.Errorf("logout revoked a token the AS never issued")
			}
		}
		matches, _ := filepath.Glob(filepath.Join(state, "oauth", "*", "*.grant"))
		if len(matches) != 0 {
			t.Errorf("grant files left after logout: %v", matches)
		}
		oaNeedsLogin(t, ctx, m, cfg, "after logout")
	})
}

// TestOAuthRemoteRefresh: serve refreshes an access token that is about
// to expire, stores the new grant, and redacts the new token too.
func TestOAuthRemoteRefresh(t *testing.T) {
	m := modes(t)[0]
	as := newOAAS(t)
	as.mu.Lock()
	as.ttl = 2 * time.Second // past half its life by the first call (below): refreshed then
	as.mu.Unlock()
	rs := newOARS(t, as)
	cfg, state := oaConfig(t, m, map[string]any{"servers": map[string]any{
		"r": map[string]any{"url": rs.url, "oauth": map[string]any{}, "tools": map[string]any{"allow": []string{"*"}}},
	}})
	if lr := oaLogin(t, m, cfg, "r"); lr.code != 0 {
		t.Fatalf("login:\n%s", lr)
	}
	grant, _ := filepath.Glob(filepath.Join(state, "oauth", "_local", "*.grant"))
	if len(grant) != 1 {
		t.Fatalf("grant files %v", grant)
	}
	before, _ := os.ReadFile(grant[0])
	time.Sleep(time.Second)
	sess, logs := oaServeStdio(t, m, cfg)
	gwMustCall(t, sess, "whoami", nil, "user alice")
	leak, err := gwCall(context.Background(), sess, "leak", nil)
	if err != nil || !strings.Contains(leak, "your token is [REDACTED") {
		t.Errorf("leak gave %q, %v; want the refreshed token redacted", leak, err)
	}
	gwClose(t, sess)
	as.mu.Lock()
	refreshes := as.refreshes
	as.mu.Unlock()
	if refreshes == 0 {
		t.Fatal("serve did not refresh a token past half its life")
	}
	after, _ := os.ReadFile(grant[0])
	if bytes.Equal(before, after) {
		t.Error("the refreshed grant was not stored")
	}
	issued, _ := as.tokens()
	oaNoToken(t, "a tool result", []byte(leak), issued)
	oaNoToken(t, "serve's stderr", []byte(logs.String()), issued)
	oaNoToken(t, "the grant file", after, issued)
}

// oaBearer adds a bearer token to every request.
type oaBearer struct{ token string }

func (b oaBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func oaFreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestOAuthGatewayJWT: serve --http with listen.http.oauth admits JWTs
// of the issuer as identities of their own (workspaces, upstream logins,
// audit), keeps the static client tokens working, serves the resource
// metadata, and refuses a wrong audience, an expired token, alg none and
// a foreign signature with 401 and WWW-Authenticate.
func TestOAuthGatewayJWT(t *testing.T) {
	forEachMode(t, oaGatewayJWT)
}

func oaGatewayJWT(t *testing.T, m mode) {
	as := newOAAS(t)
	rs := newOARS(t, as)
	addr := oaFreePort(t)
	resource := "http://" + addr + "/mcp"
	bin := goBuild(t, gwServerPkg)
	cfg, state := oaConfig(t, m, map[string]any{
		"servers": map[string]any{
			"notes": map[string]any{
				"command": []string{"/opt/bin/mcpserver", "-name", "notes"},
				"filesystem": map[string]any{"output": map[string]any{},
					"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}}},
				"tools": map[string]any{"allow": []string{"*"}}, "pin": "off",
			},
			"r": map[string]any{"url": rs.url, "oauth": map[string]any{}, "tools": map[string]any{"allow": []string{"*"}}, "pin": "off"},
		},
		"clients": []map[string]any{{"name": "carol", "token": map[string]string{"from": "env:CAROL_TOKEN"}}},
		"listen":  map[string]any{"http": map[string]any{"oauth": map[string]any{"issuer": as.issuer, "resource": resource, "scopes_supported": []string{"mcp"}}}},
	})
	// alice logs in upstream for her JWT identity; bob does not.
	as.setUser("alice-upstream")
	if lr := oaLogin(t, m, cfg, "r", "--client", "oidc.alice"); lr.code != 0 {
		t.Fatalf("login for oidc.alice:\n%s", lr)
	}
	carolToken := "carol-static-token-0123456789"
	gw := gwServeIn(t, m, "", []string{"--config", cfg, "--http", addr}, "CAROL_TOKEN="+carolToken)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	jwtFor := func(sub string) string {
		return as.sign(map[string]any{"sub": sub, "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
	}
	alice := gwConnect(t, ctx, gw.url, &http.Client{Transport: oaBearer{jwtFor("alice")}}, nil, "")
	bob := gwConnect(t, ctx, gw.url, &http.Client{Transport: oaBearer{jwtFor("bob")}}, nil, "")
	carol := gwConnect(t, ctx, gw.url, &http.Client{Transport: oaBearer{carolToken}}, nil, "")

	gwMustCall(t, alice, "notes__note_write", map[string]any{"name": "n", "text": "alice's note"}, "ok")
	gwMustCall(t, alice, "notes__note_read", map[string]any{"name": "n"}, "alice's note")
	for who, s := range map[string]*mcp.ClientSession{"bob": bob, "carol": carol} {
		if out, err := gwCall(ctx, s, "notes__note_read", map[string]any{"name": "n"}); err == nil && strings.Contains(out, "alice") {
			t.Errorf("%s read alice's note: %q", who, out)
		}
	}
	gwMustCall(t, bob, "notes__note_write", map[string]any{"name": "n", "text": "bob's note"}, "ok")
	gwMustCall(t, alice, "notes__note_read", map[string]any{"name": "n"}, "alice's note")
	for _, id := range []string{"oidc.alice", "oidc.bob"} {
		if _, err := os.Stat(filepath.Join(state, "workspaces", id)); err != nil {
			t.Errorf("no workspace dir for %s: %v", id, err)
		}
	}

	// Upstream: alice's login is hers; bob's session never gets her token.
	gwMustCall(t, alice, "r__whoami", nil, "user alice-upstream")
	if out, err := gwCall(ctx, bob, "r__whoami", nil); err == nil || !strings.Contains(err.Error()+out, "mcpbox login r") {
		t.Errorf("bob's r__whoami gave %q, %v; want an error naming `mcpbox login r`", out, err)
	}

	lg := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", cfg)
	if !strings.Contains(lg.stdout, `"client":"oidc.alice"`) || !strings.Contains(lg.stdout, `"client":"oidc.bob"`) {
		t.Errorf("audit records do not name the JWT identities:\n%s", lg)
	}

	// The resource metadata.
	base := strings.TrimSuffix(gw.url, "/mcp")
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		var md struct {
			Resource string   `json:"resource"`
			AS       []string `json:"authorization_servers"`
		}
		json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if resp.StatusCode != 200 || md.Resource != resource || len(md.AS) != 1 || md.AS[0] != as.issuer {
			t.Errorf("GET %s: %d %+v", p, resp.StatusCode, md)
		}
	}

	// Refusals.
	other := newOAAS(t) // same issuer name would be needed to pass; a foreign key fails
	other.issuer = as.issuer
	b64 := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]any{"iss": as.issuer, "sub": "mallory", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
	for name, tok := range map[string]string{
		"none":           "",
		"wrong audience": as.sign(map[string]any{"sub": "mallory", "aud": "http://127.0.0.1:1/mcp", "exp": time.Now().Add(time.Hour).Unix()}),
		"expired":        as.sign(map[string]any{"sub": "mallory", "aud": resource, "exp": time.Now().Add(-time.Hour).Unix()}),
		"alg none":       b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(claims) + ".",
		"foreign key":    other.sign(map[string]any{"sub": "mallory", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()}),
		"garbage":        "not-a-jwt-at-all-0123456789",
	} {
		t.Run(name, func(t *testing.T) {
			init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
			req, _ := http.NewRequestWithContext(ctx, "POST", gw.url, strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", resp.StatusCode)
			}
			if h := resp.Header.Get("WWW-Authenticate"); !strings.Contains(h, `resource_metadata="http://`+addr+`/.well-known/oauth-protected-resource/mcp"`) {
				t.Errorf("WWW-Authenticate %q", h)
			}
		})
	}
	lg = m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", cfg)
	if lg.code != 0 || strings.Contains(lg.stdout, "mallory") || strings.Contains(gw.logs.String(), "mallory") {
		t.Error("a refused token's subject reached the logs")
	}
}

// TestOAuthStepUpBound: the authorization server grants silent logins
// (prompt=none) without a person, and the server asks for a scope
// (admin) the user never agreed to. serve sends the authorization server
// no request for it and names `mcpbox login r --scope`; once the user
// lists admin in step_up_scopes, serve adds it silently.
func TestOAuthStepUpBound(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		as := newOAAS(t)
		rs := newOARS(t, as)
		oa := map[string]any{}
		conf := map[string]any{"servers": map[string]any{
			"r": map[string]any{"url": rs.url, "oauth": oa, "tools": map[string]any{"allow": []string{"*"}}},
		}}
		cfg, _ := oaConfig(t, m, conf)
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		if lr := oaLogin(t, m, cfg, "r"); lr.code != 0 {
			t.Fatalf("login:\n%s", lr)
		}
		before := len(as.authzRequests())
		sess, _ := oaServeStdio(t, m, cfg)
		gwMustCall(t, sess, "whoami", nil, "user alice")
		if out, err := gwCall(ctx, sess, "admin_only", nil); err == nil || !strings.Contains(err.Error(), "server r needs more scope: run `mcpbox login r --config "+cfg+" --scope admin`") {
			t.Errorf("admin_only gave %q, %v; want the step-up error naming mcpbox login r --scope", out, err)
		}
		gwClose(t, sess)
		if got := as.authzRequests()[before:]; len(got) != 0 {
			t.Errorf("serve sent %d authorization requests for a scope nobody agreed to (scope %q)", len(got), got[0].Get("scope"))
		}

		// The user lists admin: serve may add it without a person.
		oa["step_up_scopes"] = []string{"admin"}
		b, err := json.Marshal(conf)
		if err != nil {
			t.Fatal(err)
		}
		m.writeFile(t, cfg, string(b), 0o644)
		sess, _ = oaServeStdio(t, m, cfg)
		gwMustCall(t, sess, "admin_only", nil, "admin ok")
		gwClose(t, sess)
		got := as.authzRequests()[before:]
		if len(got) != 1 || got[0].Get("prompt") != "none" || got[0].Get("scope") != "admin" {
			t.Errorf("silent step-up sent %v, want one prompt=none request with scope admin", got)
		}
		// No person saw that token asked for: the audit says what it holds.
		r := m.mcpbox(t, 30*time.Second, "", "logs", "--json", "--config", cfg, "--event", "oauth_reauthorized")
		var rec struct {
			Server, Client string
			Detail         map[string]string
		}
		if r.code != 0 || json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &rec) != nil ||
			rec.Server != "r" || rec.Detail["step_up"] != "true" || !strings.Contains(rec.Detail["scope"], "admin") || rec.Detail["issuer"] == "" {
			t.Errorf("the silent step-up's audit record: %+v\n%s", rec, r)
		}
	})
}
