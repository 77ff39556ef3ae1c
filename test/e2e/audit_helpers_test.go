package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "modernc.org/sqlite" // the "sqlite" driver, to tamper with the audit database
)

// Helpers of the policy, approval and audit tests: a gateway with one
// test server "box" and one client "alice", the admin commands
// (logs, approvals, approve, deny) run as the mode's user, and the audit
// records as plain JSON objects, read without internal/audit.

// auClient is the name of the only client in the configs; auTokenEnv is
// the variable that hands its token to serve.
const (
	auClient   = "alice"
	auTokenEnv = "AU_TOKEN_ALICE"
	auServer   = "box"
)

// auSetup is one gateway config of these tests.
type auSetup struct {
	m     mode
	dir   string // the config's dir
	cfg   string // the config file
	state string // its state dir
	token string // alice's bearer token
}

// auConfig writes a config with top-level YAML extra and server box's
// YAML tools (indented by 4: the keys under "box:" besides command and
// filesystem mounts) and returns the setup.
func auConfig(t *testing.T, m mode, extra, box string) *auSetup {
	t.Helper()
	bin := goBuild(t, gwServerPkg)
	s := &auSetup{m: m, dir: m.dir(t), token: gwHex(16)}
	s.state = filepath.Join(s.dir, "state")
	s.cfg = filepath.Join(s.dir, "mcpbox.yaml")
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nstate_dir: %q\n", s.state)
	if !m.root() {
		b.WriteString("sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n")
	}
	fmt.Fprintf(&b, "clients:\n  - {name: %s, token: {from: \"env:%s\"}}\n", auClient, auTokenEnv)
	b.WriteString(extra)
	fmt.Fprintf(&b, `servers:
  %s:
    command: [/opt/bin/mcpserver, -name, %s]
    filesystem:
      mounts: [{source: %q, target: /opt/bin, mode: ro}]
`, auServer, auServer, bin)
	b.WriteString(box)
	m.writeFile(t, s.cfg, b.String(), 0o644)
	t.Logf("config:\n%s", b.String())
	return s
}

// serve starts `mcpbox serve --http` on the setup (see gwServe).
func (s *auSetup) serve(t *testing.T) *gwGateway {
	t.Helper()
	return gwServe(t, s.m, s.cfg, auTokenEnv+"="+s.token)
}

// connect opens an MCP session as alice, in gwLegacy; opts may be nil
// (then the client declares no elicitation).
func (s *auSetup) connect(t *testing.T, g *gwGateway, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return s.connectVersion(t, g, opts, gwLegacy)
}

// connectVersion is connect in the protocol revision version.
func (s *auSetup) connectVersion(t *testing.T, g *gwGateway, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hc := &http.Client{Transport: gwBearer{token: s.token, base: &http.Transport{}}}
	return gwConnect(t, ctx, g.url, hc, opts, version)
}

// cli runs `mcpbox ARGS` as the mode's user with a 60 s bound.
func (s *auSetup) cli(t *testing.T, args ...string) result {
	t.Helper()
	return s.m.mcpbox(t, 60*time.Second, "", args...)
}

// auRecord is one audit record as `mcpbox logs --json` prints it.
type auRecord map[string]any

func (r auRecord) str(k string) string { s, _ := r[k].(string); return s }

func (r auRecord) num(k string) float64 { f, _ := r[k].(float64); return f }

func (r auRecord) list(k string) []map[string]any {
	items, _ := r[k].([]any)
	var out []map[string]any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func (r auRecord) String() string {
	b, _ := json.Marshal(map[string]any(r))
	return string(b)
}

// logs runs `mcpbox logs --json --config CFG FILTERS` and decodes its lines.
func (s *auSetup) logs(t *testing.T, filters ...string) []auRecord {
	t.Helper()
	r := s.cli(t, append([]string{"logs", "--json", "--config", s.cfg}, filters...)...)
	if r.code != 0 {
		t.Fatalf("mcpbox logs %v:\n%s", filters, r)
	}
	return auDecode(t, r.stdout)
}

// auDecode reads JSON lines.
func auDecode(t *testing.T, out string) []auRecord {
	t.Helper()
	var recs []auRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r auRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("decoding %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// calls returns the call records of tool, in order.
func (s *auSetup) calls(t *testing.T, tool string) []auRecord {
	t.Helper()
	return s.logs(t, "--event", "call", "--tool", tool)
}

// pendingFor polls `mcpbox approvals --json` (up to 30 s) until a pending
// request for tool that none of skip names shows up, and returns it.
func (s *auSetup) pendingFor(t *testing.T, tool string, skip ...string) auRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last result
	for time.Now().Before(deadline) {
		last = s.cli(t, "approvals", "--json", "--config", s.cfg)
		if last.code == 0 {
			for _, line := range auDecode(t, last.stdout) {
				req, _ := line["request"].(map[string]any)
				id := line.str("id")
				if line.str("state") == "pending" && req["tool"] == tool && !slices.Contains(skip, id) {
					return line
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no pending approval for %s within 30 s; last `mcpbox approvals`:\n%s", tool, last)
	return nil
}

// approvals returns the lines of `mcpbox approvals --json` in state.
func (s *auSetup) approvals(t *testing.T, state string) []auRecord {
	t.Helper()
	r := s.cli(t, "approvals", "--json", "--config", s.cfg)
	if r.code != 0 {
		t.Fatalf("mcpbox approvals:\n%s", r)
	}
	var out []auRecord
	for _, l := range auDecode(t, r.stdout) {
		if l.str("state") == state {
			out = append(out, l)
		}
	}
	return out
}

// cliUID is the uid the mcpbox commands of these tests run as in mode m.
func cliUID(m mode) int {
	if m.root() {
		return os.Getuid()
	}
	return m.uid
}

// auCall is the outcome of a tool call made in the background.
type auCall struct {
	res  *mcp.CallToolResult
	err  error
	took time.Duration
}

// callAsync calls tool in a goroutine with a 90 s bound.
func callAsync(sess *mcp.ClientSession, tool string, args map[string]any) <-chan auCall {
	ch := make(chan auCall, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		start := time.Now()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		ch <- auCall{res, err, time.Since(start)}
	}()
	return ch
}

// await waits up to 60 s for a background call.
func await(t *testing.T, ch <-chan auCall) auCall {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not return within 60 s")
		return auCall{}
	}
}

// wantOK fails unless the call returned a non-error result with text want.
func wantOK(t *testing.T, c auCall, want string) {
	t.Helper()
	if c.err != nil {
		t.Fatalf("call failed: %v", c.err)
	}
	if c.res.IsError || gwText(c.res) != want {
		t.Fatalf("call returned isError=%v %q, want %q", c.res.IsError, gwText(c.res), want)
	}
}

// wantRefused fails unless the call returned an isError result whose text
// holds every substring.
func wantRefused(t *testing.T, c auCall, substrings ...string) {
	t.Helper()
	if c.err != nil {
		t.Fatalf("call failed with a protocol error %v, want an isError result", c.err)
	}
	text := gwText(c.res)
	if !c.res.IsError {
		t.Fatalf("call succeeded with %q, want a refusal", text)
	}
	for _, s := range substrings {
		if !strings.Contains(text, s) {
			t.Fatalf("refusal %q lacks %q", text, s)
		}
	}
}

// auFileServer serves body at path on 127.0.0.1 and counts the requests
// for it.
func auFileServer(t *testing.T, path string, body []byte) (addr string, hits *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hits = new(atomic.Int64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), hits
}

// auCopyState copies the audit database files (not the shared-memory
// file) of state into a new dir.
func auCopyState(t *testing.T, state string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"audit.db", "audit.db-wal", "audit.db.head"} {
		b, err := os.ReadFile(filepath.Join(state, name))
		if os.IsNotExist(err) && name == "audit.db-wal" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// auExec runs one statement on an SQLite file and wants it to change a row.
func auExec(t *testing.T, path, stmt string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(stmt, args...)
	if err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s %v changed %d rows, want 1", stmt, args, n)
	}
}
