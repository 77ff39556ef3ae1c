package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests drive `mcpbox serve` with the TypeScript SDK v2 client
// (test/e2e/node/client2026.mjs over @modelcontextprotocol/client) on the
// sessionless MCP revision 2026-07-28, over HTTP and over stdio, against
// the built-in workspace server (a 2026-capable upstream) and
// server-everything (a 2025 upstream the gateway initializes), while
// 2025-era clients use the same gateway.

// ts26Script places client2026.mjs beside nodeModules (as tsClientScript
// does for client.mjs) and returns its path.
func ts26Script(t *testing.T, nodeModules string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(nodeModules, "@modelcontextprotocol/client/package.json")); err != nil {
		if os.Getenv("MCPBOX_E2E_REQUIRE") == "1" {
			t.Fatalf("@modelcontextprotocol/client missing (run: npm ci --prefix test/e2e/node): %v", err)
		}
		t.Skip("@modelcontextprotocol/client not installed: npm ci --prefix test/e2e/node")
	}
	dst := filepath.Join(filepath.Dir(nodeModules), "client2026.mjs")
	tsClientCopy.Lock()
	defer tsClientCopy.Unlock()
	src, err := os.ReadFile("node/client2026.mjs")
	if err == nil {
		err = os.WriteFile(dst, src, 0o644)
	}
	if err != nil {
		t.Fatalf("placing client2026.mjs: %v", err)
	}
	return dst
}

// ts26Run runs a node client script as m's user with args and steps and
// returns one reply per step. It returns an error rather than failing the
// test, so that it can run beside another client.
func ts26Run(m mode, script string, env []string, steps []tsStep, args ...string) ([]tsReply, string, error) {
	in, err := json.Marshal(steps)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8", "MCP_CLIENT_TIMEOUT_S=90"}, env...)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !m.root() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.uid), Groups: []uint32{}}
	}
	err = runGroup(cmd)
	if err != nil || ctx.Err() != nil {
		return nil, errb.String(), fmt.Errorf("%s %v: %v (ctx: %v)\nstdout:\n%s\nstderr:\n%s", filepath.Base(script), args, err, ctx.Err(), out.String(), errb.String())
	}
	var replies []tsReply
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line == "" {
			continue
		}
		var r tsReply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, errb.String(), fmt.Errorf("%s printed %q: %v\nstderr:\n%s", filepath.Base(script), line, err, errb.String())
		}
		replies = append(replies, r)
	}
	if len(replies) != len(steps) {
		return nil, errb.String(), fmt.Errorf("%s gave %d replies to %d steps\nstdout:\n%s\nstderr:\n%s", filepath.Base(script), len(replies), len(steps), out.String(), errb.String())
	}
	return replies, errb.String(), nil
}

// sub returns r[key] as a reply ({} if it is not an object).
func (r tsReply) sub(key string) tsReply {
	m, _ := r[key].(map[string]any)
	return tsReply(m)
}

func (r tsReply) String() string {
	b, _ := json.Marshal(map[string]any(r))
	return string(b)
}

// ts26Workspace is the YAML of the built-in workspace server writing to
// out, with write_file under review and nothing else.
func ts26Workspace(out string) string {
	return fmt.Sprintf(`  ws:
    builtin: workspace
    filesystem:
      output: {source: %q}
    tools: {allow: ["*"], approve: [write_file], approve_annotations: []}
`, out)
}

// TestTSClient2026Serve: the TypeScript SDK v2 client at 2026-07-28
// through `mcpbox serve` over HTTP and over stdio: discover, the
// aggregated tools of the workspace server and server-everything, calls
// to both, an approval answered through the SDK's input_required round
// trip (once runs the call, deny refuses it), and one driven by hand
// whose tampered request states (MAC, payload, other arguments) are
// refused without touching the waiting call, whose genuine state runs it
// and whose replay is refused. Over HTTP a 2025 Go SDK session and the
// TypeScript SDK 1.x client use the same gateway at the same time.
func TestTSClient2026Serve(t *testing.T) {
	nodeModules := requireNode(t)
	script := ts26Script(t, nodeModules)
	legacyScript := tsClientScript(t, nodeModules)
	forEachMode(t, func(t *testing.T, m mode) {
		for _, transport := range []string{"http", "stdio"} {
			t.Run(transport, func(t *testing.T) {
				out := m.dir(t)
				token := tsRandomHex(t)
				extra := ""
				if transport == "http" {
					extra = "clients:\n  - {name: alice, token: {from: env:TOKEN_ALICE}}\n"
				}
				cfg := tsConfig(t, m, extra, ts26Workspace(out)+tsNodeServer("everything", nodeModules, "", tsEverythingJS, "stdio"))
				msg := "hello 2026 " + tsRandomHex(t)
				once := "approved once " + tsRandomHex(t)
				manual := "approved by hand " + tsRandomHex(t)
				steps := []tsStep{
					{"op": "info"},
					{"op": "listTools"},
					{"op": "callTool", "name": "everything__echo", "arguments": map[string]any{"message": msg}},
					{"op": "callTool", "name": "ws__write_file", "arguments": map[string]any{"path": "output/once.txt", "content": once}, "answer": "once"},
					{"op": "callTool", "name": "ws__write_file", "arguments": map[string]any{"path": "output/denied.txt", "content": "no"}, "answer": "deny"},
					{"op": "approveManual", "name": "ws__write_file", "arguments": map[string]any{"path": "output/manual.txt", "content": manual},
						"otherArguments": map[string]any{"path": "output/evil.txt", "content": "evil"}, "answer": "once"},
					{"op": "callTool", "name": "ws__read_file", "arguments": map[string]any{"path": "output/once.txt"}},
				}

				var r []tsReply
				var stderr string
				var err error
				var g *gwGateway
				if transport == "stdio" {
					r, stderr, err = ts26Run(m, script, nil, steps, "stdio", "--", mcpboxBin, "serve", "--stdio", "--config", cfg)
				} else {
					g = gwServe(t, m, cfg, "TOKEN_ALICE="+token)
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					hc := &http.Client{Transport: gwBearer{token: token, base: &http.Transport{}}}
					legacy := gwConnect(t, ctx, g.url, hc, nil, gwLegacy)
					if v := legacy.InitializeResult().ProtocolVersion; v != gwLegacy {
						t.Fatalf("the Go SDK client negotiated %s, want %s", v, gwLegacy)
					}
					gwMustCall(t, legacy, "everything__echo", map[string]any{"message": "before"}, "Echo: before")
					// The TypeScript SDK 1.x client (2025-era, with a
					// session) runs beside the 2026 client.
					var wg sync.WaitGroup
					var old []tsReply
					var oldErr error
					wg.Add(1)
					go func() {
						defer wg.Done()
						old, _, oldErr = ts26Run(m, legacyScript, nil, []tsStep{
							{"op": "serverInfo"},
							{"op": "listTools"},
							tsCall("everything__echo", map[string]any{"message": "from 1.x"}),
							tsCall("ws__read_file", map[string]any{"path": "output/once.txt"}),
						}, "http", g.url, "--token", token)
					}()
					r, stderr, err = ts26Run(m, script, nil, steps, "http", g.url, "--token", token)
					wg.Wait()
					if oldErr != nil {
						t.Errorf("the TypeScript SDK 1.x client: %v", oldErr)
					} else {
						if names := old[1].names(t, "tools"); !slices.Contains(names, "ws__write_file") || !slices.Contains(names, "everything__echo") {
							t.Errorf("the 1.x client's tools/list: %v", names)
						}
						if old[2].failed() || old[2].text() != "Echo: from 1.x" {
							t.Errorf("the 1.x client's echo: %v", old[2])
						}
					}
					// The Go SDK 2025 session lived through it all.
					gwMustCall(t, legacy, "everything__echo", map[string]any{"message": "after"}, "Echo: after")
					if got := gwMustCall(t, legacy, "ws__read_file", map[string]any{"path": "output/manual.txt"}, ""); !strings.Contains(got, manual) {
						t.Errorf("the 2025 session reads %q from the file the 2026 client wrote, want %q", got, manual)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("client2026.mjs stderr:\n%s", stderr)
				for i, x := range r {
					t.Logf("step %v:\n%v", steps[i]["op"], x)
				}

				if info := r[0]; info["era"] != "modern" || info["version"] != "2026-07-28" {
					t.Errorf("the v2 client is not on 2026-07-28: %v", info)
				}
				names := r[1].names(t, "tools")
				for _, want := range []string{"ws__write_file", "ws__read_file", "ws__list_files", "everything__echo"} {
					if !slices.Contains(names, want) {
						t.Errorf("tools/list lacks %s: %v", want, names)
					}
				}
				if echo := r[2].sub("result"); echo.failed() || echo.text() != "Echo: "+msg {
					t.Errorf("everything__echo = %v, want %q", r[2], "Echo: "+msg)
				}
				if e, _ := r[2]["elicitations"].([]any); len(e) != 0 {
					t.Errorf("echo asked for input: %v", r[2])
				}

				// Approval through the SDK's own input_required driver.
				ts26CheckForm(t, r[3], "once.txt")
				if res := r[3].sub("result"); res.failed() {
					t.Errorf("write_file answered once failed: %v", r[3])
				}
				if b, err := os.ReadFile(filepath.Join(out, "once.txt")); err != nil || string(b) != once {
					t.Errorf("once.txt = %q, %v; want %q", b, err, once)
				}
				ts26CheckForm(t, r[4], "denied.txt")
				if res := r[4].sub("result"); !res.failed() || !strings.Contains(res.text()+fmt.Sprint(res["error"]), "approv") {
					t.Errorf("write_file answered deny: %v, want an error about approval", r[4])
				}
				if _, err := os.Stat(filepath.Join(out, "denied.txt")); err == nil {
					t.Errorf("the denied call wrote denied.txt")
				}

				// By hand: tampered states refused, the genuine one runs, a replay is refused.
				h := r[5]
				first := h.sub("first")
				if first["resultType"] != "input_required" || first["requestState"] == nil {
					t.Fatalf("the first leg is not input_required with a state: %v", first)
				}
				reqs, _ := first["inputRequests"].(map[string]any)
				if b, _ := json.Marshal(reqs); len(reqs) != 1 || !strings.Contains(string(b), "write_file") || !strings.Contains(string(b), "manual.txt") {
					t.Errorf("inputRequests %s: want one approval form naming write_file and its arguments", b)
				}
				for _, leg := range []string{"signature", "payload", "otherArguments", "replay"} {
					if e := h.sub(leg); !strings.Contains(fmt.Sprint(e["error"]), "requestState refused") || e["code"] != float64(-32602) {
						t.Errorf("%s leg: %v, want -32602 requestState refused", leg, e)
					}
				}
				if g := h.sub("genuine"); g.failed() || g["resultType"] == "input_required" {
					t.Errorf("the genuine leg: %v, want the call's result", g)
				}
				if b, err := os.ReadFile(filepath.Join(out, "manual.txt")); err != nil || string(b) != manual {
					t.Errorf("manual.txt = %q, %v; want %q", b, err, manual)
				}
				if _, err := os.Stat(filepath.Join(out, "evil.txt")); err == nil {
					t.Errorf("a state moved to other arguments wrote evil.txt")
				}
				if res := r[6].sub("result"); res.failed() || res.text() != once {
					t.Errorf("read_file (not under review) = %v, want %q", r[6], once)
				}
				if e, _ := r[6]["elicitations"].([]any); len(e) != 0 {
					t.Errorf("read_file asked for approval: %v", r[6])
				}

				// The audit has the three calls that ran or were refused
				// by their answer, decided through the client's input
				// request: once, deny, and the hand-driven once; and one
				// denied record for each of the four retries whose
				// requestState was refused (other arguments, payload,
				// replay, signature), which ran nothing.
				if g != nil {
					g.stop(t)
				}
				lr := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", cfg, "--event", "call", "--tool", "ws__write_file")
				if lr.code != 0 {
					t.Fatalf("mcpbox logs:\n%s", lr)
				}
				var recs, refused []auRecord
				for _, rec := range auDecode(t, lr.stdout) {
					if strings.HasPrefix(rec.str("rule"), "refused: its requestState") {
						refused = append(refused, rec)
						if rec.str("decision") != "deny" || rec.str("outcome") != "denied" || rec.str("approver") != "" {
							t.Errorf("refused retry's record %v: want denied, no approver", rec)
						}
						continue
					}
					recs = append(recs, rec)
				}
				if len(refused) != 4 {
					t.Errorf("%d records of refused retries, want 4: %v", len(refused), refused)
				}
				want := [][2]string{{"approved", "ok"}, {"denied", "denied"}, {"approved", "ok"}}
				if len(recs) != len(want) {
					t.Fatalf("%d write_file call records, want %d: %v", len(recs), len(want), recs)
				}
				for i, w := range want {
					if rec := recs[i]; rec.str("decision") != w[0] || rec.str("outcome") != w[1] || !strings.HasPrefix(rec.str("approver"), "elicitation") {
						t.Errorf("call record %v: want decision %s, outcome %s, approver elicitation...", rec, w[0], w[1])
					}
				}
			})
		}
	})
}

// ts26CheckForm checks that a callTool reply was asked exactly one
// approval whose message names write_file and the file.
func ts26CheckForm(t *testing.T, r tsReply, file string) {
	t.Helper()
	e, _ := r["elicitations"].([]any)
	if len(e) != 1 {
		t.Errorf("%d approval forms, want 1: %v", len(e), r)
		return
	}
	b, _ := json.Marshal(e[0])
	if !strings.Contains(string(b), "write_file") || !strings.Contains(string(b), file) {
		t.Errorf("approval form %s does not name write_file and %s", b, file)
	}
}
