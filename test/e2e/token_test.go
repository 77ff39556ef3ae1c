package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDefaultTokenStable: the embedded default over HTTP keeps its token
// in the project's state dir, so a client config written at the first
// start still works after a restart; `mcpbox token rotate` makes a new
// one, which the running serve accepts at once while refusing the old.
func TestDefaultTokenStable(t *testing.T) {
	m := mode{name: "root", uid: -1}
	if os.Geteuid() != 0 {
		t.Skip("the embedded default needs cgroups, which the unprivileged user lacks here")
	}
	p := newDefaultProject(t, m)
	home := m.dir(t)
	env := "HOME=" + home
	start := func() (*gwGateway, string) {
		t.Helper()
		g := gwServeIn(t, m, p.dir, nil, env)
		return g, bannerToken(t, g)
	}

	g, first := start()
	// The project's own state dir (package instance).
	files, _ := filepath.Glob(filepath.Join(home, ".local", "state", "mcpbox", "projects", "*", "token"))
	if len(files) != 1 {
		t.Fatalf("token files of the project after the first start: %v, want one", files)
	}
	tokenFile := files[0]
	fi, err := os.Lstat(tokenFile)
	if err != nil {
		t.Fatalf("no token file after the first start: %v", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %s: mode %v, want a regular file 0600", tokenFile, fi.Mode())
	}
	if b, _ := os.ReadFile(tokenFile); strings.TrimSpace(string(b)) != first {
		t.Errorf("token file holds %q, the banner shows %q", b, first)
	}
	tokenStatus(t, g.url, "", http.StatusUnauthorized)
	tokenReadHello(t, g.url, first, p.hello)
	g.stop(t)

	g, again := start()
	if again != first {
		t.Fatalf("after a restart the banner shows token %q, want the kept %q", again, first)
	}
	tokenReadHello(t, g.url, first, p.hello)

	// Rotate while serve runs: it picks the new token up.
	r := tokenRun(t, m, p.dir, env, "token", "rotate")
	next := strings.TrimSpace(r.stdout)
	if r.code != 0 || next == first || !strings.HasPrefix(next, "mcpbox_") {
		t.Fatalf("token rotate:\n%s", r)
	}
	tokenStatus(t, g.url, first, http.StatusUnauthorized)
	tokenReadHello(t, g.url, next, p.hello)
	tokenStatus(t, g.url, first, http.StatusUnauthorized)
	if strings.Contains(g.logs.String(), next) {
		t.Errorf("serve's output shows the rotated token in clear:\n%s", g.logs)
	}
	g.stop(t)

	g, after := start()
	if after != next {
		t.Fatalf("after rotate and restart the banner shows %q, want %q", after, next)
	}
	tokenStatus(t, g.url, first, http.StatusUnauthorized)
	tokenReadHello(t, g.url, next, p.hello)
}

// TestServeConfigToken: a config without clients, served over HTTP, is
// no longer open to every local process: a request needs the token kept
// in its state dir.
func TestServeConfigToken(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := gwConfig(t, m, "solo")
		// --config=FILE: gwServeIn adds --no-auth only to "--config FILE".
		g := gwServeIn(t, m, "", []string{"--config=" + cfg})
		tokenFile := filepath.Join(filepath.Dir(cfg), "state", "token")
		if !g.logs.waitFor(tokenFile, 10*time.Second) {
			t.Errorf("serve does not say where its token is (%s):\n%s", tokenFile, g.logs)
		}
		fi, err := os.Lstat(tokenFile)
		if err != nil {
			t.Fatalf("no token file: %v", err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || (!m.root() && int(st.Uid) != m.uid) {
			t.Errorf("token file mode %v uid %d, want 0600 owned by serve's user", fi.Mode(), st.Uid)
		}
		b, _ := os.ReadFile(tokenFile)
		token := strings.TrimSpace(string(b))

		tokenStatus(t, g.url, "", http.StatusUnauthorized)
		tokenStatus(t, g.url, token+"x", http.StatusUnauthorized)
		tokenStatus(t, g.url, token, http.StatusOK)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := gwConnectErr(ctx, g.url, nil, nil, gwLegacy); err == nil {
			t.Error("an MCP client without the token connected")
		}
		sess := gwConnect(t, ctx, g.url, &http.Client{Transport: gwBearer{token: token, base: gwHTTP.Transport}}, nil, gwLegacy)
		gwMustCall(t, sess, "echo", map[string]any{"text": "with token"}, "with token")
		gwClose(t, sess)
		g.stop(t)

		// A token file others can read is refused, not used.
		if err := os.Chmod(tokenFile, 0o644); err != nil {
			t.Fatal(err)
		}
		r := tokenRun(t, m, "", "", "serve", "--config="+cfg, "--http", "127.0.0.1:0")
		if r.code != 1 || !strings.Contains(r.stderr, tokenFile) || !strings.Contains(r.stderr, "0600") || strings.Contains(r.stderr, "serving MCP") {
			t.Errorf("serve with a world-readable token file:\n%s", r)
		}
	})
}

// TestServeNoAuth: --no-auth serves a config without clients without a
// token on loopback, with a warning; it is refused on any other address
// and with clients.
func TestServeNoAuth(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := gwConfig(t, m, "solo")
		g := gwServeIn(t, m, "", []string{"--config", cfg, "--no-auth"})
		if !g.logs.waitFor("warning: --no-auth", 10*time.Second) {
			t.Errorf("no warning about --no-auth:\n%s", g.logs)
		}
		tokenStatus(t, g.url, "", http.StatusOK)
		if _, err := os.Lstat(filepath.Join(filepath.Dir(cfg), "state", "token")); err == nil {
			t.Error("--no-auth made a token file")
		}

		for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
			r := tokenRun(t, m, "", "", "serve", "--config", cfg, "--http", addr, "--no-auth")
			if r.code != 2 || !strings.Contains(r.stderr, "only a loopback address") || strings.Contains(r.stderr, "serving MCP") {
				t.Errorf("serve --http %s --no-auth:\n%s", addr, r)
			}
		}
		withClients := gwConfigWith(t, m, gwConfigOpts{servers: []string{"solo"}, clients: map[string]string{"alice": "ALICE_TOKEN"}})
		r := tokenRun(t, m, "", "ALICE_TOKEN=alice-token-0123456789", "serve", "--config", withClients, "--http", "127.0.0.1:0", "--no-auth")
		if r.code != 2 || !strings.Contains(r.stderr, "has clients") {
			t.Errorf("serve --no-auth with clients:\n%s", r)
		}
	})
}

// bannerToken waits for the embedded default's banner and returns its
// token.
func bannerToken(t *testing.T, g *gwGateway) string {
	t.Helper()
	_, token, _ := defaultBanner(t, g)
	return token
}

// tokenStatus POSTs an initialize with token ("": none) and checks the
// HTTP status.
func tokenStatus(t *testing.T, url, token string, want int) {
	t.Helper()
	const body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Errorf("POST %s with token %q: status %d, want %d", url, token, resp.StatusCode, want)
	}
}

// tokenReadHello reads input/hello.txt through the built-in server with
// token and checks its text.
func tokenReadHello(t *testing.T, url, token, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess := gwConnect(t, ctx, url, &http.Client{Transport: gwBearer{token: token, base: gwHTTP.Transport}}, nil, gwLegacy)
	gwMustCall(t, sess, "read_file", map[string]any{"path": "input/hello.txt"}, want)
}

// tokenRun runs mcpbox ARGS as m's user in dir ("": the test's own) with
// env added, bounded.
func tokenRun(t *testing.T, m mode, dir, env string, args ...string) result {
	t.Helper()
	var envs []string
	if env != "" {
		envs = []string{env}
	}
	return runIn(t, m, dir, "", envs, args...)
}
