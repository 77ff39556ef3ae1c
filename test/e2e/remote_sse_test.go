package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRemoteSSEEverything: a real npm server that speaks only the legacy
// HTTP+SSE transport (@modelcontextprotocol/server-everything in its sse
// mode: GET /sse, POST /message) is a remote server with transport: sse;
// a loopback proxy in front of it checks that the configured header and
// query parameter (servers.*.query) are on the event stream and on every
// message, and serve's log does not show the parameter's value.
func TestRemoteSSEEverything(t *testing.T) {
	modules := requireNode(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, node, filepath.Join(modules, "@modelcontextprotocol/server-everything/dist/index.js"), "sse")
	srv.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "PORT=" + strconv.Itoa(port)}
	srv.WaitDelay = 5 * time.Second
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "running on port") {
				up <- true
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything sse did not start within 30 s")
	}

	const header, key = "sse-header-value-0123456789", "sse-query-key-0123456789"
	var seen, refused atomic.Int32
	target, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(port))
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // the event stream
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if r.Header.Get("X-Test-Auth") != header || r.URL.Query().Get("api_key") != key {
			refused.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go proxy.Serve(pl)
	t.Cleanup(func() { proxy.Close() })

	forEachMode(t, func(t *testing.T, m mode) {
		dir := gwDir(t, m)
		ref, keyRef := filepath.Join(dir, "hdr"), filepath.Join(dir, "key")
		m.writeFile(t, ref, header, 0o600)
		m.writeFile(t, keyRef, key, 0o600)
		cfg, _ := oaConfig(t, m, map[string]any{"servers": map[string]any{
			"e": map[string]any{"url": "http://" + pl.Addr().String() + "/sse", "transport": "sse", "pin": "off",
				"headers": map[string]any{"X-Test-Auth": map[string]string{"from": "file:" + ref}},
				"query":   map[string]any{"api_key": map[string]string{"from": "file:" + keyRef}},
				"tools":   map[string]any{"allow": []string{"echo"}}},
		}})
		before := seen.Load()
		sess, logs := oaServeStdio(t, m, cfg)
		got := gwMustCall(t, sess, "echo", map[string]any{"message": "over the old transport"}, "")
		if !strings.Contains(got, "over the old transport") {
			t.Errorf("echo gave %q\n%s", got, logs)
		}
		// ps shows the connection: no ID, the origin, never the query
		// parameter; the instance counts no sandbox for it.
		r := m.mcpbox(t, 30*time.Second, "", "ps", "--json", "--config", cfg)
		var rows []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var row map[string]any
			if json.Unmarshal([]byte(line), &row) == nil {
				rows = append(rows, row)
			}
		}
		if len(rows) != 1 || rows[0]["id"] != "" || rows[0]["server"] != "e" || rows[0]["state"] != "running" ||
			rows[0]["remote"] != "http://"+pl.Addr().String() || rows[0]["started"] == nil {
			t.Errorf("ps --json: want one row of server e's running connection from http://%s:\n%s", pl.Addr(), r)
		}
		r = m.mcpbox(t, 30*time.Second, "", "ps", "--config", cfg)
		if !strings.Contains(r.stdout, "http://"+pl.Addr().String()) || strings.Contains(r.stdout, key) || strings.Contains(r.stdout, "/sse") {
			t.Errorf("ps: want the connection's origin and nothing more of its URL:\n%s", r)
		}
		if r = m.mcpbox(t, 30*time.Second, "", "ps", "--instances", "--json", "--config", cfg); !strings.Contains(r.stdout, `"sandboxes":0`) {
			t.Errorf("ps --instances --json: want no sandbox counted for a connection:\n%s", r)
		}
		gwClose(t, sess)
		if n := refused.Load(); n != 0 {
			t.Errorf("%d requests reached the proxy without the header or the query parameter", n)
		}
		if strings.Contains(logs.String(), key) {
			t.Errorf("serve's log shows the query parameter's value:\n%s", logs)
		}
		if n := seen.Load() - before; n < 3 { // the stream, initialize, the call at least
			t.Errorf("the proxy saw %d requests, want the stream and the messages", n)
		}
	})
}

// TestRemoteURLPathKeyRedacted: a key in a remote server's URL path
// (https://host/s/KEY/mcp, which cannot be a secret reference) is
// redacted like a secret: the error a client gets when the server cannot
// be reached, which quotes the URL, serve's log and the reason ps gives
// for the connection show the rest of the URL but not the key.
func TestRemoteURLPathKeyRedacted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now: every connect is refused
	const key = "Zk9hY3Rpb25LZXk2NDIxOTg3NjU0MzIx"
	forEachMode(t, func(t *testing.T, m mode) {
		cfg, _ := oaConfig(t, m, map[string]any{"servers": map[string]any{
			"zap": map[string]any{"url": "http://" + closed + "/api/mcp/s/" + key + "/mcp", "pin": "off",
				"tools": map[string]any{"allow": []string{"*"}}},
		}})
		sess, logs := oaServeStdio(t, m, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := gwCall(ctx, sess, "zap__anything", map[string]any{})
		if err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "[REDACTED:url_zap]") {
			t.Errorf("a call to the unreachable server: %v; want an error with the key redacted", err)
		}
		// ps and the dashboard give the connection's error as its reason.
		r := m.mcpbox(t, 30*time.Second, "", "ps", "--json", "--config", cfg)
		if r.code != 0 || strings.Contains(r.stdout+r.stderr, key) || !strings.Contains(r.stdout, "[REDACTED:url_zap]") {
			t.Errorf("ps --json: want the connection's error with the key redacted:\n%s", r)
		}
		gwClose(t, sess)
		if strings.Contains(logs.String(), key) {
			t.Errorf("serve's log shows the URL's key:\n%s", logs)
		}
	})
}
