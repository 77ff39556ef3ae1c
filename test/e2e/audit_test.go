package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The audit tests drive `mcpbox serve --http` with the test server and
// read the audit log back through `mcpbox logs --json`, the JSONL mirror
// and the raw SQLite file. Every expected value is computed here: the
// file digest from the host file, the session from the client, the
// sandbox from the sandbox events.

// TestAuditCallRecord: one allowed call that fetches through the egress
// proxy and writes a file gets one complete record (in the database and
// the JSONL mirror); a call the policy denies is recorded as denied and
// never reaches the server; the session and sandbox events frame them.
func TestAuditCallRecord(t *testing.T) {
	body := make([]byte, 3000)
	rand.Read(body)
	const urlPath = "/pkgs/demo/-/demo-1.2.3.tgz"
	addr, hits := auFileServer(t, urlPath, body)
	_, port, _ := net.SplitHostPort(addr)
	url := "http://" + addr + urlPath
	forEachMode(t, func(t *testing.T, m mode) {
		hits.Store(0)
		s := auConfig(t, m, "audit: {jsonl: ./audit.jsonl}\n", fmt.Sprintf(`      output: {}
    network:
      egress: [{host: 127.0.0.1, ports: [%s]}]
    tools:
      rules: [{tool: fetch_write, when: 'args.path.startsWith("ok/")', action: allow}]
`, port))
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		mcpSession := sess.ID()
		okPath := "ok/dl-" + gwHex(4) + ".tgz"
		wantOK(t, await(t, callAsync(sess, "fetch_write", map[string]any{"url": url, "path": okPath})), strconv.Itoa(len(body)))
		wantRefused(t, await(t, callAsync(sess, "fetch_write", map[string]any{"url": url, "path": "bad/x"})),
			"the policy denies fetch_write", "the when of servers.box.tools.rules[0] does not hold for these arguments")
		gwClose(t, sess)
		g.stop(t)

		if n := hits.Load(); n != 1 {
			t.Errorf("the file server got %d requests, want 1 (the denied call must not run)", n)
		}
		hostFile := filepath.Join(s.state, "workspaces", auClient, auServer, "output", filepath.FromSlash(okPath))
		written, err := os.ReadFile(hostFile)
		if err != nil {
			t.Fatalf("the allowed call's file on the host: %v", err)
		}
		if string(written) != string(body) {
			t.Fatalf("the host file holds %d bytes, not the served body", len(written))
		}
		sum := sha256.Sum256(written)
		if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(hostFile)), "bad")); err == nil {
			t.Errorf("the denied call wrote bad/ in the workspace")
		}

		calls := s.calls(t, "fetch_write")
		var allowed, denied []auRecord
		for _, r := range calls {
			switch r.str("decision") {
			case "allow":
				allowed = append(allowed, r)
			case "deny":
				denied = append(denied, r)
			}
		}
		if len(calls) != 2 || len(allowed) != 1 || len(denied) != 1 {
			t.Fatalf("want one allowed and one denied call record, got %d:\n%v", len(calls), calls)
		}
		a := allowed[0]
		t.Logf("allowed call record: %v", a)
		// The session's id, as the audit has it; its frame is checked below.
		sid := a.str("session")
		if sid == "" {
			t.Errorf("the call record names no session")
		}
		if sid != mcpSession {
			t.Errorf("session = %q, want the client's MCP session id %q", sid, mcpSession)
		}
		// fetch_write says openWorldHint and leaves destructiveHint out,
		// which MCP takes as true: its category is destructive.
		for k, want := range map[string]string{
			"client": auClient, "workspace": auClient + "/" + auServer, "server": auServer,
			"tool": "fetch_write", "category": "destructive", "outcome": "ok",
		} {
			if got := a.str(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if !strings.HasPrefix(a.str("sandbox"), "sbx_") {
			t.Errorf("sandbox = %q, want sbx_...", a.str("sandbox"))
		}
		if !strings.Contains(a.str("rule"), "tools.rules[0]") {
			t.Errorf("rule = %q, want tools.rules[0]", a.str("rule"))
		}
		if a.num("duration_ms") <= 0 || a.num("result_size") <= 0 {
			t.Errorf("duration_ms %v, result_size %v: want both > 0", a["duration_ms"], a["result_size"])
		}
		auCheckShape(t, a, []string{"path", "url"}, url, okPath, addr)
		wantFiles := []map[string]any{{"path": "/workspace/output/" + okPath, "size": float64(len(body)), "sha256": hex.EncodeToString(sum[:])}}
		if diff := cmp.Diff(wantFiles, a.list("files")); diff != "" {
			t.Errorf("files (-want +got):\n%s", diff)
		}
		var sawDomain bool
		for _, d := range a.list("domains") {
			sawDomain = sawDomain || d["host"] == "127.0.0.1" && fmt.Sprint(d["port"]) == port
		}
		if !sawDomain {
			t.Errorf("domains %v lack 127.0.0.1:%s", a["domains"], port)
		}

		d := denied[0]
		if d.str("outcome") != "denied" || d.str("session") != sid || d.str("client") != auClient {
			t.Errorf("denied call record: %v", d)
		}
		if len(d.list("files")) != 0 || len(d.list("domains")) != 0 {
			t.Errorf("the denied call has files or domains: %v", d)
		}
		auCheckShape(t, d, []string{"path", "url"}, url, "bad/x", addr)

		auCheckMirror(t, filepath.Join(s.dir, "audit.jsonl"), a, d)
		auCheckFrames(t, s, sid, a.str("sandbox"))
	})
}

// auCheckShape checks that arg_shape names keys and holds none of values.
func auCheckShape(t *testing.T, r auRecord, keys []string, values ...string) {
	t.Helper()
	shape, ok := r["arg_shape"].(map[string]any)
	if !ok {
		t.Errorf("arg_shape %v is not an object", r["arg_shape"])
		return
	}
	if got := slices.Sorted(maps.Keys(shape)); !slices.Equal(got, keys) {
		t.Errorf("arg_shape keys %v, want %v", got, keys)
	}
	raw, _ := json.Marshal(shape)
	for _, v := range values {
		if strings.Contains(string(raw), v) {
			t.Errorf("arg_shape %s holds the argument value %q", raw, v)
		}
	}
}

// auCheckMirror: the JSONL mirror has the same records as the database.
func auCheckMirror(t *testing.T, path string, recs ...auRecord) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the JSONL mirror: %v", err)
	}
	bySeq := map[float64]auRecord{}
	for _, r := range auDecode(t, string(raw)) {
		bySeq[r.num("seq")] = r
	}
	for _, r := range recs {
		want := maps.Clone(r)
		delete(want, "id") // logs --json adds it
		got, ok := bySeq[r.num("seq")]
		if !ok {
			t.Errorf("the JSONL mirror lacks seq %v", r["seq"])
			continue
		}
		if diff := cmp.Diff(map[string]any(want), map[string]any(got)); diff != "" {
			t.Errorf("JSONL record seq %v differs from logs --json (-logs +jsonl):\n%s", r["seq"], diff)
		}
	}
}

// auCheckFrames: the session has its start and end, the sandbox its start
// and stop, under the ids the call record names.
func auCheckFrames(t *testing.T, s *auSetup, sid, sbx string) {
	t.Helper()
	events := func(recs []auRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.str("event"))
		}
		return out
	}
	sess := events(s.logs(t, "--session", sid))
	for _, ev := range []string{"session_start", "call", "session_end"} {
		if !slices.Contains(sess, ev) {
			t.Errorf("records of session %s: %v, want a %s", sid, sess, ev)
		}
	}
	if len(sess) > 0 && (sess[0] != "session_start" || sess[len(sess)-1] != "session_end") {
		t.Errorf("records of session %s: %v, want session_start first and session_end last", sid, sess)
	}
	sbxRecs := s.logs(t, "--sandbox", sbx)
	got := events(sbxRecs)
	for _, ev := range []string{"sandbox_start", "call", "sandbox_stop"} {
		if !slices.Contains(got, ev) {
			t.Errorf("records of sandbox %s: %v, want a %s", sbx, got, ev)
		}
	}
	for _, r := range sbxRecs {
		if ev := r.str("event"); (ev == "sandbox_start" || ev == "sandbox_stop") && r.str("server") != auServer {
			t.Errorf("%s record names server %q, want %s: %v", ev, r.str("server"), auServer, r)
		}
	}
	// Every sandbox_start of this gateway is the call's sandbox: one agent,
	// one server.
	for _, r := range s.logs(t, "--event", "sandbox_start") {
		if r.str("sandbox") != sbx {
			t.Errorf("another sandbox started: %v (the call ran in %s)", r, sbx)
		}
	}
}

// TestAuditRateLimit: the third quick call of a tool limited to a burst
// of two is refused with a retry hint and audited as rate_limited.
func TestAuditRateLimit(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", `    tools:
      allow: ["*"]
      rate_limit: {per_client_tool: 2, burst: 2}
`)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		var last auCall
		for i := range 3 {
			text := fmt.Sprintf("call %d", i)
			last = await(t, callAsync(sess, "echo", map[string]any{"text": text}))
			if i < 2 {
				wantOK(t, last, text)
			}
		}
		wantRefused(t, last, "rate limit reached for echo", "retry after")
		if secs, _ := last.res.Meta["mcpbox/retryAfterSeconds"].(float64); secs <= 0 {
			t.Errorf("_meta %v: want mcpbox/retryAfterSeconds > 0", last.res.Meta)
		}
		// Another tool has its own budget.
		wantOK(t, await(t, callAsync(sess, "whoami", nil)), auServer)
		g.stop(t)
		var decisions []string
		for _, r := range s.calls(t, "echo") {
			decisions = append(decisions, r.str("decision")+"/"+r.str("outcome"))
		}
		if want := []string{"allow/ok", "allow/ok", "rate_limited/rate_limited"}; !slices.Equal(decisions, want) {
			t.Errorf("echo call records: %v, want %v", decisions, want)
		}
		// The session was still open when serve stopped: its end is
		// recorded all the same.
		var starts, ends int
		for _, r := range s.logs(t) {
			switch r.str("event") {
			case "session_start":
				starts++
			case "session_end":
				ends++
			}
		}
		if starts != 1 || ends != 1 {
			t.Errorf("%d session_start and %d session_end records, want one each", starts, ends)
		}
	})
}

// TestAuditUnknownTool: a call of a tool the config hides, and of one the
// server does not offer, is refused as an unknown tool, never reaches the
// server, and each gets a denied record that says why.
func TestAuditUnknownTool(t *testing.T) {
	m := modes(t)[0]
	s := auConfig(t, m, "", `    tools:
      allow: ["*"]
      deny: [whoami]
`)
	g := s.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: gwBearer{token: s.token, base: &http.Transport{}}}
	// Both eras: a 2026 client's call passes the Mcp-Param header check
	// first, which must not answer differently for a hidden tool and a
	// missing one (nor skip the record).
	for _, version := range []string{gwLegacy, "2026-07-28"} {
		sess := gwConnect(t, ctx, g.url, hc, nil, version)
		var errs []string
		for _, name := range []string{"whoami", "no_such_tool"} {
			_, err := gwCall(ctx, sess, name, map[string]any{"k": "v"})
			if err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Fatalf("%s: calling %s: %v, want an unknown tool error", version, name, err)
			}
			errs = append(errs, strings.ReplaceAll(err.Error(), name, "NAME"))
		}
		if errs[0] != errs[1] {
			t.Errorf("%s: a hidden and a missing tool get different answers: %q", version, errs)
		}
		gwMustCall(t, sess, "echo", map[string]any{"text": "after"}, "after")
		gwClose(t, sess)
	}
	g.stop(t)

	rules := map[string][]string{}
	for _, r := range s.logs(t, "--event", "call") {
		if r.str("outcome") == "denied" {
			if r.str("decision") != "deny" || r.str("client") != auClient || r.str("server") != auServer {
				t.Errorf("unknown-tool record %v: want decision deny, client %s, server %s", r, auClient, auServer)
			}
			rules[r.str("name")] = append(rules[r.str("name")], r.str("rule"))
		}
	}
	hidden := "unknown tool: the policy hides it from this client (tools.allow/deny, clients[].tools)"
	missing := "unknown tool: not in the tools/list this client was given"
	want := map[string][]string{"whoami": {hidden, hidden}, "no_such_tool": {missing, missing}}
	if !maps.EqualFunc(rules, want, slices.Equal) {
		t.Fatalf("denied call records (name: rules) %v, want %v (one per era)", rules, want)
	}
}

// TestAuditTamper edits and deletes rows of a copy of the audit database
// behind mcpbox's back: `mcpbox logs verify` must name the damage and
// exit 1, and pass an untouched copy.
func TestAuditTamper(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", "    tools: {allow: [\"*\"]}\n")
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		for i := range 4 {
			wantOK(t, await(t, callAsync(sess, "echo", map[string]any{"text": fmt.Sprint(i)})), fmt.Sprint(i))
		}
		gwClose(t, sess)
		g.stop(t)
		r := s.cli(t, "logs", "verify", "--config", s.cfg)
		if r.code != 0 || !strings.Contains(r.stdout, "chain intact") {
			t.Fatalf("logs verify of the untouched log:\n%s", r)
		}
		// It prints the head hash, which docs/config.md says to copy
		// elsewhere to anchor the chain.
		if head, err := os.ReadFile(filepath.Join(s.state, "audit.db.head")); err != nil {
			t.Fatal(err)
		} else if _, hash, _ := strings.Cut(strings.TrimSpace(string(head)), " "); hash == "" || !strings.Contains(r.stdout, "head "+hash) {
			t.Fatalf("logs verify does not print the head hash %q:\n%s", hash, r)
		}
		calls := s.calls(t, "echo")
		all := s.logs(t)
		if len(calls) != 4 || len(all) < 6 {
			t.Fatalf("want 4 echo calls among at least 6 records, got %d of %d", len(calls), len(all))
		}
		edited := int64(calls[1].num("seq"))
		deleted := int64(all[len(all)/2].num("seq"))
		if deleted == edited {
			deleted = int64(calls[2].num("seq"))
		}
		root := mode{name: "root", uid: -1}
		check := func(name, stmt string, seq int64, wantCode int, wantText string) {
			t.Run(name, func(t *testing.T) {
				dir := auCopyState(t, s.state)
				if stmt != "" {
					auExec(t, filepath.Join(dir, "audit.db"), stmt, seq)
				}
				c := &auSetup{m: root}
				r := c.cli(t, "logs", "verify", "--state-dir", dir)
				if r.code != wantCode || !strings.Contains(r.stdout, wantText) {
					t.Fatalf("logs verify after %q (seq %d): want exit %d and %q\n%s", stmt, seq, wantCode, wantText, r)
				}
				if wantCode != 0 && !regexp.MustCompile(`\b`+strconv.FormatInt(seq, 10)+`\b`).MatchString(r.stdout) {
					t.Fatalf("logs verify does not name seq %d:\n%s", seq, r)
				}
			})
		}
		check("untouched copy", "", 0, 0, "chain intact")
		check("tool edited", "UPDATE audit_records SET tool = 'innocent' WHERE seq = ?", edited, 1, "edited")
		check("body edited", "UPDATE audit_records SET body = replace(body, '\"echo\"', '\"ohce\"') WHERE seq = ?", edited, 1, "edited")
		check("middle row deleted", "DELETE FROM audit_records WHERE seq = ?", deleted, 1, "deleted")
	})
}

// TestAuditSecretNeverStored: a server's secret comes back in a result
// and the client sends it as an argument, with payloads recorded; no byte
// of the audit (database, WAL, head, JSONL, logs output) nor any other
// file of the state dir holds it, nor the client's token.
func TestAuditSecretNeverStored(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		secret := "s3cr3t-" + gwHex(16)
		s := auConfig(t, m, "audit: {jsonl: ./audit.jsonl, include_payloads: true}\n", `    secrets: {API_TOKEN: {from: "env:AU_SECRET"}}
    tools: {allow: ["*"]}
`)
		g := gwServe(t, m, s.cfg, auTokenEnv+"="+s.token, "AU_SECRET="+secret)
		sess := s.connect(t, g, nil)
		got := await(t, callAsync(sess, "getenv", map[string]any{"text": "API_TOKEN"}))
		if got.err != nil || got.res.IsError || gwText(got.res) == "" {
			t.Fatalf("getenv API_TOKEN: %v %v: the server must hold the secret for this test to mean anything", got.err, got.res)
		}
		if strings.Contains(gwText(got.res), secret) {
			t.Errorf("the client got the secret in a result: %q", gwText(got.res))
		}
		// A value that is no secret is stored with the payloads: the scan
		// below sees stored values.
		marker := "marker-" + gwHex(8)
		for _, text := range []string{secret, "before " + secret + " after", marker} {
			c := await(t, callAsync(sess, "echo", map[string]any{"text": text}))
			if c.err != nil || c.res.IsError {
				t.Fatalf("echo: %v %v", c.err, c.res)
			}
		}
		gwClose(t, sess)
		g.stop(t)

		logs := s.cli(t, "logs", "--json", "--config", s.cfg)
		if logs.code != 0 {
			t.Fatalf("mcpbox logs:\n%s", logs)
		}
		text := s.cli(t, "logs", "--config", s.cfg)
		// Payloads were recorded: otherwise the check below proves little.
		var payloads int
		for _, r := range auDecode(t, logs.stdout) {
			if r.str("event") == "call" && r["payload"] != nil {
				payloads++
			}
		}
		if payloads != 4 {
			t.Errorf("%d call records with a payload, want 4 (include_payloads: true)", payloads)
		}
		sources := map[string][]byte{"logs --json": []byte(logs.stdout), "logs": []byte(text.stdout)}
		for _, root := range []string{s.state, s.dir} {
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return nil
				}
				b, err := os.ReadFile(p)
				if err != nil {
					t.Errorf("reading %s: %v", p, err)
					return nil
				}
				sources[p] = b
				return nil
			})
		}
		for _, name := range []string{"audit.db", "audit.jsonl"} {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(sources)), func(p string) bool { return filepath.Base(p) == name }) {
				t.Errorf("no %s found to scan", name)
			}
		}
		for _, name := range []string{"audit.db", "audit.jsonl", "logs --json"} {
			var found bool
			for p, b := range sources {
				found = found || (p == name || filepath.Base(p) == name) && strings.Contains(string(b), marker)
			}
			if !found {
				t.Errorf("the echoed non-secret %q is not in %s: the payloads are not where this test looks", marker, name)
			}
		}
		for name, b := range sources {
			for label, v := range map[string]string{"the secret": secret, "the client token": s.token} {
				if i := strings.Index(string(b), v); i >= 0 {
					t.Errorf("%s holds %s at byte %d", name, label, i)
				}
			}
		}
	})
}

// TestPolicyCheckCELError: a CEL syntax error in a rule's when is reported
// by `mcpbox policy check` at FILE:LINE:COL inside the expression.
func TestPolicyCheckCELError(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", `    tools:
      allow: ["*"]
      rules:
        - tool: fetch_write
          when: 'args.path.startsWith("ok/") && )'
          action: allow
`)
		src, err := os.ReadFile(s.cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Where the expression is in the file, found here.
		var line, from, to int
		sc := bufio.NewScanner(strings.NewReader(string(src)))
		for n := 1; sc.Scan(); n++ {
			if i := strings.Index(sc.Text(), "'args.path"); i >= 0 {
				line, from, to = n, i+2, strings.LastIndex(sc.Text(), "'")
			}
		}
		r := s.cli(t, "policy", "check", s.cfg)
		out := r.stdout + r.stderr
		if r.code != 1 {
			t.Fatalf("policy check of a bad when: want exit 1\n%s", r)
		}
		re := regexp.MustCompile(regexp.QuoteMeta(s.cfg) + `:(\d+):(\d+):`)
		mm := re.FindStringSubmatch(out)
		if mm == nil {
			t.Fatalf("policy check output has no %s:LINE:COL\n%s", s.cfg, r)
		}
		l, _ := strconv.Atoi(mm[1])
		c, _ := strconv.Atoi(mm[2])
		if l != line || c < from || c > to {
			t.Fatalf("policy check points at %d:%d, want line %d, column %d..%d (the expression)\n%s", l, c, line, from, to, r)
		}
		if !strings.Contains(out, "when") {
			t.Errorf("policy check does not name the when key\n%s", r)
		}
		t.Logf("policy check: %s", strings.TrimSpace(out))
	})
}
