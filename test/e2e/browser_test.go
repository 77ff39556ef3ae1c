package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBrowserAgent runs Playwright's MCP server as a package server
// (`npx -y @playwright/mcp`, installed from the loopback registry) with
// the host's Chromium from Debian, inside its sandbox with the default
// limits and no network: a tool call opens a page from the workspace
// input and returns its snapshot; the browser's processes die with the
// sandbox.
func TestBrowserAgent(t *testing.T) {
	modules := requireNode(t)
	if _, err := os.Stat(filepath.Join(modules, "@playwright/mcp/package.json")); err != nil {
		t.Skipf("@playwright/mcp not installed: %v", err)
	}
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("MCPBOX_E2E_REQUIRE") == "1" {
			t.Fatalf("chromium missing (apt-get install chromium): %v", err)
		}
		t.Skipf("chromium not installed: %v", err)
	}
	reg := newNPMRegistry(t, modules)
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		input := filepath.Join(dir, "site")
		m.mkdir(t, input)
		title, marker := "title-"+gwHex(8), "body-"+gwHex(8)
		m.writeFile(t, filepath.Join(input, "page.html"),
			"<!doctype html><html><head><title>"+title+"</title></head><body><h1>Hello</h1><p id=m>"+marker+"</p></body></html>\n", 0o644)
		procMarker := "MCPBOX_BROWSER_" + gwHex(8)
		cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": map[string]any{
			"browser": map[string]any{
				// The page is a file of the workspace input: the browser has
				// no network. mcpbox is the sandbox, so Chromium's own is
				// off, and file:// is the browser's to open (Playwright
				// blocks it outside the server's working directory).
				"command": []string{"npx", "-y", "@playwright/mcp", "--browser", "chromium",
					"--executable-path", chromium, "--headless", "--no-sandbox", "--isolated",
					"--allow-unrestricted-file-access"},
				"filesystem": map[string]any{"input": map[string]any{"source": input}},
				"env":        map[string]string{procMarker: "1"},
				// browser_navigate says destructiveHint (and openWorldHint),
				// which would wait for a human's approval.
				"tools": map[string]any{"allow": []string{"*"}, "approve_annotations": []string{}},
			},
		}}
		if !m.root() {
			cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
		}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		cfgPath := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfgPath, string(b), 0o644)

		sess, logs, stopServe := pkgServe(t, m, cfgPath, "NPM_CONFIG_REGISTRY="+reg.url(), "HOME="+dir)
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				stopServe()
			}
		}
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		tools, err := sess.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v\n%s", err, logs)
		}
		names := map[string]bool{}
		for _, tool := range tools.Tools {
			names[tool.Name] = true
		}
		if !names["browser_navigate"] || !names["browser_snapshot"] {
			t.Fatalf("tools: %v\n%s", names, logs)
		}
		// The browser's first start (and the page) bounded by 90 s.
		nctx, ncancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer ncancel()
		got, err := gwCall(nctx, sess, "browser_navigate", map[string]any{"url": "file:///workspace/input/page.html"})
		if err != nil {
			t.Fatalf("browser_navigate: %v\n%s", err, logs)
		}
		// navigate reports the page's title (its snapshot goes to a file);
		// browser_snapshot returns the page's text.
		if !strings.Contains(got, "Page Title: "+title) {
			t.Fatalf("browser_navigate did not load the page (title %s):\n%s\n%s", title, got, logs)
		}
		if got := gwMustCall(t, sess, "browser_snapshot", map[string]any{}, ""); !strings.Contains(got, marker) {
			t.Fatalf("browser_snapshot lacks the page's marker %s:\n%s", marker, got)
		}
		// The browser has no network: a page on the host's loopback is
		// not reached (the sandbox's loopback is its own).
		var hits atomic.Int64
		host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			io.WriteString(w, "<title>host-"+marker+"</title>")
		}))
		defer host.Close()
		got, err = gwCall(nctx, sess, "browser_navigate", map[string]any{"url": host.URL + "/"})
		if hits.Load() != 0 || (err == nil && strings.Contains(got, "host-"+marker)) {
			t.Errorf("the sandboxed browser reached the host (%d requests): %v\n%s", hits.Load(), err, got)
		}
		running := browserProcs(t, procMarker)
		if len(running) == 0 {
			t.Fatalf("no chromium process carries %s while the server runs", procMarker)
		}
		threads, rss := 0, 0
		for _, pid := range running {
			st, _ := os.ReadFile(filepath.Join("/proc", pid, "status"))
			for _, l := range strings.Split(string(st), "\n") {
				var n int
				if _, err := fmt.Sscanf(l, "Threads: %d", &n); err == nil {
					threads += n
				}
				if _, err := fmt.Sscanf(l, "VmRSS: %d kB", &n); err == nil {
					rss += n
				}
			}
		}
		t.Logf("chromium in the sandbox: %d processes, %d threads, %d MiB RSS (default limits: 512 pids, 1Gi)", len(running), threads, rss>>10)
		stop()
		deadline := time.Now().Add(10 * time.Second)
		for left := browserProcs(t, procMarker); len(left) > 0; left = browserProcs(t, procMarker) {
			if time.Now().After(deadline) {
				t.Fatalf("browser processes outlived the sandbox: %v", left)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// browserProcs lists the pids of chromium processes whose environment
// holds marker (the test runs as root: every /proc/PID/environ reads).
func browserProcs(t *testing.T, marker string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte(marker+"=")) {
			continue
		}
		if exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); strings.Contains(exe, "chromium") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
