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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBrowserAgent runs Playwright's MCP server as a package server
// (`npx -y @playwright/mcp`, installed from the loopback registry) with
// the host's Chromium from Debian, inside its sandbox with the default
// limits: server "offline" has no network and opens a page of its
// workspace input; server "web" may reach one host page through the
// egress proxy and no other. The browsers' processes die with serve.
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
	// Two pages on the host's loopback: "allowed" is the one egress rule
	// of server "web"; "other" is allowed to no one.
	marker := "host-" + gwHex(8)
	var allowedHits, otherHits atomic.Int64
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			allowedHits.Add(1)
		}
		io.WriteString(w, "<!doctype html><title>allowed page</title><p>"+marker+"</p>")
	}))
	defer allowed.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		otherHits.Add(1)
		io.WriteString(w, "<title>other-"+marker+"</title>")
	}))
	defer other.Close()
	allowedPort, _ := strconv.Atoi(allowed.URL[strings.LastIndex(allowed.URL, ":")+1:])

	forEachMode(t, func(t *testing.T, m mode) {
		allowedHits.Store(0)
		otherHits.Store(0)
		dir := m.dir(t)
		input := filepath.Join(dir, "site")
		m.mkdir(t, input)
		title, text := "title-"+gwHex(8), "body-"+gwHex(8)
		m.writeFile(t, filepath.Join(input, "page.html"),
			"<!doctype html><html><head><title>"+title+"</title></head><body><h1>Hello</h1><p id=m>"+text+"</p></body></html>\n", 0o644)
		procMarker := "MCPBOX_BROWSER_" + gwHex(8)
		// mcpbox is the sandbox, so Chromium's own is off; file:// is the
		// browser's to open (Playwright blocks it outside the server's
		// working directory), and it sees only the sandbox's files.
		browser := []string{"npx", "-y", "@playwright/mcp", "--browser", "chromium",
			"--executable-path", chromium, "--headless", "--no-sandbox", "--isolated",
			"--allow-unrestricted-file-access"}
		// browser_navigate says destructiveHint and openWorldHint, which
		// would wait for a human's approval.
		tools := map[string]any{"allow": []string{"*"}, "approve_annotations": []string{}}
		cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": map[string]any{
			"offline": map[string]any{
				"command":    browser,
				"filesystem": map[string]any{"input": map[string]any{"source": input}},
				"env":        map[string]string{procMarker: "offline"},
				"tools":      tools,
			},
			"web": map[string]any{
				// Chromium never proxies loopback addresses by itself: the
				// test's page is on 127.0.0.1, so the proxy is named with
				// loopback not bypassed. (Other hosts go through the
				// sandbox's http_proxy without this.)
				"command": append(append([]string{}, browser...),
					"--proxy-server", "http://127.0.0.1:3128", "--proxy-bypass", "<-loopback>"),
				"network": map[string]any{"egress": []map[string]any{{"host": "127.0.0.1", "ports": []int{allowedPort}}}},
				"env":     map[string]string{procMarker: "web"},
				"tools":   tools,
			},
		}}
		if !m.root() {
			cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
		}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		cfgPath := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfgPath, string(b), 0o644)

		changed := make(chan struct{}, 1)
		sess, logs, stopServe := pkgServeWith(t, m, cfgPath, listChanged(changed), "NPM_CONFIG_REGISTRY="+reg.url(), "HOME="+dir)
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				stopServe()
			}
		}
		defer stop()
		// The second install may end after serve began serving the first
		// (it joins the session then).
		waitTools(t, sess, changed, logs, "offline__browser_navigate", "offline__browser_snapshot", "web__browser_navigate")
		// Each browser's first start (and its page) bounded by 90 s.
		navigate := func(server, url string) (string, error) {
			nctx, ncancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer ncancel()
			return gwCall(nctx, sess, server+"__browser_navigate", map[string]any{"url": url})
		}

		// offline: a page of the workspace input. navigate reports its
		// title (its snapshot goes to a file); browser_snapshot returns
		// the page's text.
		got, err := navigate("offline", "file:///workspace/input/page.html")
		if err != nil {
			t.Fatalf("browser_navigate: %v\n%s", err, logs)
		}
		if !strings.Contains(got, "Page Title: "+title) {
			t.Fatalf("browser_navigate did not load the page (title %s):\n%s\n%s", title, got, logs)
		}
		if got := gwMustCall(t, sess, "offline__browser_snapshot", map[string]any{}, ""); !strings.Contains(got, text) {
			t.Fatalf("browser_snapshot lacks the page's text %s:\n%s", text, got)
		}
		// No network: the host's loopback is not the sandbox's.
		got, err = navigate("offline", allowed.URL+"/")
		if allowedHits.Load() != 0 || (err == nil && strings.Contains(got, "allowed page")) {
			t.Errorf("the offline browser reached the host (%d requests): %v\n%s", allowedHits.Load(), err, got)
		}

		// web: the allowed page loads through the egress proxy; another
		// port of the same host does not.
		got, err = navigate("web", allowed.URL+"/")
		if err != nil || !strings.Contains(got, "Page Title: allowed page") || allowedHits.Load() == 0 {
			t.Fatalf("the web browser did not load its allowed page (%d requests): %v\n%s\n%s", allowedHits.Load(), err, got, logs)
		}
		if got := gwMustCall(t, sess, "web__browser_snapshot", map[string]any{}, ""); !strings.Contains(got, marker) {
			t.Errorf("web's snapshot lacks the page's text %s:\n%s", marker, got)
		}
		got, err = navigate("web", other.URL+"/")
		if otherHits.Load() != 0 || (err == nil && strings.Contains(got, "other-"+marker)) {
			t.Errorf("the web browser reached a host no rule allows (%d requests): %v\n%s", otherHits.Load(), err, got)
		}

		for _, server := range []string{"offline", "web"} {
			running := browserProcs(t, procMarker+"="+server)
			if len(running) == 0 {
				t.Fatalf("no chromium process of %s while serve runs", server)
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
			t.Logf("chromium of %s: %d processes, %d threads, %d MiB RSS, sandbox cgroup memory %s (default limits: 512 pids, 1Gi)",
				server, len(running), threads, rss>>10, cgroupMemory(running[0]))
		}
		stop()
		deadline := time.Now().Add(10 * time.Second)
		for left := browserProcs(t, procMarker); len(left) > 0; left = browserProcs(t, procMarker) {
			if time.Now().After(deadline) {
				t.Fatalf("browser processes outlived serve: %v", left)
			}
			time.Sleep(100 * time.Millisecond)
		}

		// The audit log has web's connection to its page, allowed, and
		// the refused one.
		r := m.mcpbox(t, 30*time.Second, "", "logs", "--json", "--config", cfgPath)
		if r.code != 0 {
			t.Fatalf("mcpbox logs:\n%s", r)
		}
		var allowedRec, deniedRec bool
		for _, rec := range auDecode(t, r.stdout) {
			if detail, _ := rec["detail"].(map[string]any); rec.str("event") != "egress" || detail["phase"] == "package install" {
				continue
			}
			d := rec.list("domains")
			if len(d) != 1 {
				continue
			}
			hostport := fmt.Sprint(d[0]["host"], ":", d[0]["port"])
			switch {
			case rec.str("server") != "web":
				t.Errorf("an egress record of another server: %s", rec)
			case hostport == strings.TrimPrefix(allowed.URL, "http://") && rec.str("decision") == "allow":
				allowedRec = true
			case hostport == strings.TrimPrefix(other.URL, "http://") && rec.str("decision") == "deny":
				deniedRec = true
			}
		}
		if !allowedRec || !deniedRec {
			t.Errorf("audit log: allowed page recorded %v, refused page recorded %v\n%s", allowedRec, deniedRec, r.stdout)
		}
	})
}

// browserProcs lists the pids of chromium processes whose environment
// holds the entry env (the test runs as root: every /proc/PID/environ
// reads). env is "KEY=VALUE" or "KEY" for any value.
func browserProcs(t *testing.T, env string) []string {
	t.Helper()
	if !strings.Contains(env, "=") {
		env += "="
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, environ...), []byte("\x00"+env)) {
			continue
		}
		if exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); strings.Contains(exe, "chromium") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// cgroupMemory reads the memory use of pid's cgroup (v1 or v2), for the
// log: what a browser needs against the default limits.
func cgroupMemory(pid string) string {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "/sbx_") {
			continue // not the sandbox's own (none without cgroups)
		}
		var f string
		switch {
		case parts[1] == "memory":
			f = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.usage_in_bytes")
		case parts[0] == "0" && parts[1] == "":
			f = filepath.Join("/sys/fs/cgroup", parts[2], "memory.current")
		default:
			continue
		}
		if v, err := os.ReadFile(f); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil {
				return strconv.FormatInt(n>>20, 10) + " MiB"
			}
		}
	}
	return "unknown"
}
