package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The approval tests hold calls of tools under tools.approve and decide
// them through each channel: the calling client's elicitation (the
// TypeScript SDK's client), the CLI, the timeout and remembered answers.

// auApproveBox is server box's tools with whoami under review.
const auApproveBox = `    tools:
      allow: ["*"]
      approve: [whoami]
`

// auElicitJS is a TypeScript-SDK client that declares elicitation,
// answers every elicitation with ANSWER (once, session or deny), calls
// whoami once and prints {result, elicitations}.
const auElicitJS = `import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const deadline = setTimeout(() => { process.stderr.write("timed out\n"); process.exit(2); }, 60000);
const [url, token, answer] = process.argv.slice(2);
const elicitations = [];
const client = new Client({ name: "approve-e2e-ts", version: "1" }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  elicitations.push(req.params);
  return { action: "accept", content: { decision: answer } };
});
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: "Bearer " + token } } });
await client.connect(transport);
let result;
try {
  result = await client.callTool({ name: "whoami", arguments: {} }, undefined, { timeout: 50000 });
} catch (e) {
  result = { error: String(e.message ?? e) };
}
process.stdout.write(JSON.stringify({ result, elicitations }) + "\n");
await transport.terminateSession().catch(() => {});
await client.close();
clearTimeout(deadline);
`

// auElicitReply is what auElicitJS prints.
type auElicitReply struct {
	Result struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		IsError bool   `json:"isError"`
		Error   string `json:"error"`
	} `json:"result"`
	Elicitations []struct {
		Message         string         `json:"message"`
		RequestedSchema map[string]any `json:"requestedSchema"`
	} `json:"elicitations"`
}

func (r auElicitReply) text() string {
	var b strings.Builder
	for _, c := range r.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// runElicitClient runs auElicitJS against url as alice.
func runElicitClient(t *testing.T, nodeModules, url, token, answer string) auElicitReply {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(nodeModules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "approve.mjs")
	if err := os.WriteFile(script, []byte(auElicitJS), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, url, token, answer)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := runGroup(cmd)
	if err != nil {
		t.Fatalf("approve.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	var r auElicitReply
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("approve.mjs printed %q: %v\nstderr:\n%s", out.String(), err, errb.String())
	}
	return r
}

// TestApprovalElicitation: a client that declares elicitation is asked to
// approve its own call with a form whose decision is once, session or
// deny; "once" lets the call run, "deny" refuses it.
func TestApprovalElicitation(t *testing.T) {
	nm := requireNode(t)
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "approvals: {timeout: 1m}\n", auApproveBox)
		g := s.serve(t)
		once := runElicitClient(t, nm, g.url, s.token, "once")
		if once.Result.IsError || once.Result.Error != "" || once.text() != auServer {
			t.Errorf("answered once: result %+v, want %q", once.Result, auServer)
		}
		if len(once.Elicitations) != 1 {
			t.Fatalf("answered once: %d elicitations, want 1", len(once.Elicitations))
		}
		e := once.Elicitations[0]
		props, _ := e.RequestedSchema["properties"].(map[string]any)
		decision, _ := props["decision"].(map[string]any)
		enum := fmt.Sprint(decision["enum"])
		for _, c := range []string{"once", "session", "deny"} {
			if !strings.Contains(enum, c) {
				t.Errorf("elicitation schema %v: decision enum lacks %q", e.RequestedSchema, c)
			}
		}
		if strings.Contains(enum, "always") {
			t.Errorf("elicitation offers always: %v", e.RequestedSchema)
		}
		if !strings.Contains(e.Message, "whoami") {
			t.Errorf("elicitation message %q does not name the tool", e.Message)
		}
		deny := runElicitClient(t, nm, g.url, s.token, "deny")
		if !deny.Result.IsError || !strings.Contains(deny.text(), "approval") {
			t.Errorf("answered deny: result %+v, want an isError result about approval", deny.Result)
		}
		g.stop(t)

		// The clients ran one after the other: their records are in order.
		recs := s.calls(t, "whoami")
		if len(recs) != 2 || recs[0].str("session") == recs[1].str("session") {
			t.Fatalf("want two whoami call records of two sessions, got %v", recs)
		}
		for i, want := range [][2]string{{"approved", "ok"}, {"denied", "denied"}} {
			r := recs[i]
			if r.str("decision") != want[0] || r.str("outcome") != want[1] || !strings.HasPrefix(r.str("approver"), "elicitation") {
				t.Errorf("call record %v: want decision %s, outcome %s, approver elicitation...", r, want[0], want[1])
			}
		}
	})
}

// TestApprovalCLI: a client without elicitation waits while `mcpbox
// approvals` lists its call; `mcpbox approve` lets it run, `mcpbox deny`
// refuses it, and the audit names the deciding uid.
func TestApprovalCLI(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "approvals: {timeout: 1m}\n", auApproveBox)
		g := s.serve(t)
		sess := s.connect(t, g, nil)

		call := callAsync(sess, "whoami", nil)
		p := s.pendingFor(t, "whoami")
		req, _ := p["request"].(map[string]any)
		for k, want := range map[string]string{"server": auServer, "tool": "whoami", "client": auClient} {
			if req[k] != want {
				t.Errorf("pending request %s = %v, want %q (%v)", k, req[k], want, p)
			}
		}
		select {
		case c := <-call:
			t.Fatalf("the call returned before any decision: %+v", c)
		default:
		}
		// serve's log says at once which call waits, with its ID, the
		// commands that decide it and the dashboard; never the token.
		dashboard := strings.TrimSuffix(g.url, "/mcp") + "/ui/"
		wantLog := []string{"a call waits for approval", p.str("id"), "mcpbox approve " + p.str("id") + " --state-dir",
			"mcpbox deny " + p.str("id"), dashboard}
		var logs string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			logs = g.logs.String()
			missing := ""
			for _, w := range wantLog {
				if !strings.Contains(logs, w) {
					missing = w
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve's log lacks %q while the call waits:\n%s", missing, logs)
			}
		}
		if strings.Contains(logs, s.token) {
			t.Errorf("serve's log shows the bearer token:\n%s", logs)
		}
		if r := s.cli(t, "approve", p.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approve:\n%s", r)
		}
		wantOK(t, await(t, call), auServer)

		call = callAsync(sess, "whoami", nil)
		p2 := s.pendingFor(t, "whoami", p.str("id"))
		if r := s.cli(t, "deny", p2.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox deny:\n%s", r)
		}
		wantRefused(t, await(t, call), "needs approval and was not approved")
		// A decided request cannot be decided again.
		if r := s.cli(t, "approve", p2.str("id"), "--config", s.cfg); r.code == 0 {
			t.Errorf("approving an already denied request succeeded:\n%s", r)
		}
		// Nothing waits now: a sentence, not a bare table header.
		if r := s.cli(t, "approvals", "--config", s.cfg); r.code != 0 || r.stdout != "no calls or definition changes wait for approval\n" {
			t.Errorf("mcpbox approvals with nothing waiting:\n%s", r)
		}
		// An ID this project does not know may wait in another's.
		if r := s.cli(t, "deny", "apr_nope", "--config", s.cfg); r.code != 1 || !strings.Contains(r.stderr, "no such approval (mcpbox approvals --all lists every project's; deny ID --all decides there)") {
			t.Errorf("mcpbox deny of an unknown ID:\n%s", r)
		}
		g.stop(t)

		who := fmt.Sprintf("cli:uid=%d", cliUID(m))
		var got []string
		for _, r := range s.calls(t, "whoami") {
			got = append(got, r.str("decision")+"/"+r.str("outcome")+"/"+r.str("approver"))
			if r.str("session") != req["session"] {
				t.Errorf("call record of session %q, the pending request's was %v", r.str("session"), req["session"])
			}
		}
		want := []string{"approved/ok/" + who, "denied/denied/" + who}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("whoami call records %v, want %v", got, want)
		}
	})
}

// TestApprovalTimeout: nobody decides, so the call is refused after
// approvals.timeout, and the audit says the timeout denied it.
func TestApprovalTimeout(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "approvals: {timeout: 1s}\n", auApproveBox)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		c := await(t, callAsync(sess, "whoami", nil))
		// The refusal asks for a person's decision and names no command
		// the agent could run to approve itself.
		wantRefused(t, c, "needs approval and was not approved", "a person, not the agent", "ask the user")
		if txt := gwText(c.res); strings.Contains(txt, s.token) || strings.Contains(txt, "mcpbox approve") || strings.Contains(txt, "log") {
			t.Errorf("the refusal shows the bearer token, an approve command or where one is: %s", txt)
		}
		if c.took < 900*time.Millisecond || c.took > 15*time.Second {
			t.Errorf("refused after %v, want about the 1 s timeout", c.took)
		}
		g.stop(t)
		recs := s.calls(t, "whoami")
		if len(recs) != 1 || recs[0].str("approver") != "timeout" || recs[0].str("decision") != "denied" {
			t.Errorf("whoami call records %v, want one denied by timeout", recs)
		}
	})
}

// TestApprovalRemembered: approve --session answers the same call for the
// rest of the session only; approve --always survives a restart of serve
// until `mcpbox approvals revoke`.
func TestApprovalRemembered(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		// A timeout far beyond quick's 20 s: a call that waits for a human
		// fails quick, a remembered one returns at once.
		s := auConfig(t, m, "approvals: {timeout: 2m}\n", auApproveBox)
		g := s.serve(t)
		quick := func(t *testing.T, ch <-chan auCall) auCall {
			t.Helper()
			select {
			case c := <-ch:
				return c
			case <-time.After(20 * time.Second):
				t.Fatalf("a remembered call still waits after 20 s; approvals:\n%s", s.cli(t, "approvals", "--config", s.cfg))
				return auCall{}
			}
		}

		// --session
		sess1 := s.connect(t, g, nil)
		call := callAsync(sess1, "whoami", nil)
		p1 := s.pendingFor(t, "whoami")
		if r := s.cli(t, "approve", "--session", p1.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approve --session:\n%s", r)
		}
		wantOK(t, await(t, call), auServer)
		wantOK(t, quick(t, callAsync(sess1, "whoami", nil)), auServer)

		sess2 := s.connect(t, g, nil)
		call = callAsync(sess2, "whoami", nil)
		p2 := s.pendingFor(t, "whoami", p1.str("id"))
		// --always
		if r := s.cli(t, "approve", "--always", p2.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approve --always:\n%s", r)
		}
		wantOK(t, await(t, call), auServer)
		gwClose(t, sess1)
		gwClose(t, sess2)
		g.stop(t)

		g = s.serve(t)
		remembered := s.approvals(t, "remembered")
		if len(remembered) != 1 || remembered[0].str("id") != p2.str("id") {
			t.Errorf("remembered after a restart: %v, want %s only", remembered, p2.str("id"))
		}
		sess3 := s.connect(t, g, nil)
		wantOK(t, quick(t, callAsync(sess3, "whoami", nil)), auServer)
		if r := s.cli(t, "approvals", "revoke", p2.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approvals revoke:\n%s", r)
		}
		call = callAsync(sess3, "whoami", nil)
		p4 := s.pendingFor(t, "whoami", p1.str("id"), p2.str("id"))
		if r := s.cli(t, "deny", p4.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox deny:\n%s", r)
		}
		wantRefused(t, await(t, call), "not approved")
		gwClose(t, sess3)
		g.stop(t)

		who := fmt.Sprintf("cli:uid=%d", cliUID(m))
		var got []string
		for _, r := range s.calls(t, "whoami") {
			got = append(got, r.str("decision")+"/"+r.str("approver"))
		}
		want := []string{
			"approved/" + who, "approved/remembered:" + p1.str("id"), // session 1
			"approved/" + who,                     // session 2, approved always
			"approved/remembered:" + p2.str("id"), // after the restart
			"denied/" + who,                       // after the revoke
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("whoami call records:\n got %v\nwant %v", got, want)
		}

		// While no serve runs, a decision remembered for always is
		// listed, with a note saying so, and revoked: the next serve asks
		// again. Before, both needed a running serve, which honoured it.
		g = s.serve(t)
		sess4 := s.connect(t, g, nil)
		call = callAsync(sess4, "whoami", nil)
		p5 := s.pendingFor(t, "whoami", p1.str("id"), p2.str("id"), p4.str("id"))
		if r := s.cli(t, "approve", "--always", p5.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approve --always:\n%s", r)
		}
		wantOK(t, await(t, call), auServer)
		gwClose(t, sess4)
		g.stop(t)
		if r := s.cli(t, "approvals", "--config", s.cfg); r.code != 0 || !strings.Contains(r.stdout, p5.str("id")) || !strings.Contains(r.stderr, "no mcpbox serve is running") {
			t.Fatalf("mcpbox approvals while no serve runs:\n%s", r)
		}
		if r := s.cli(t, "approvals", "revoke", p5.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approvals revoke while no serve runs:\n%s", r)
		}
		// Nothing kept either: still an answer, not a failure.
		if r := s.cli(t, "approvals", "--config", s.cfg); r.code != 0 || strings.Contains(r.stdout, p5.str("id")) || !strings.Contains(r.stderr, "no decision is kept") {
			t.Fatalf("mcpbox approvals while no serve runs, nothing remembered:\n%s", r)
		}
		g = s.serve(t)
		sess5 := s.connect(t, g, nil)
		call = callAsync(sess5, "whoami", nil)
		p6 := s.pendingFor(t, "whoami", p1.str("id"), p2.str("id"), p4.str("id"), p5.str("id"))
		if r := s.cli(t, "deny", p6.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox deny:\n%s", r)
		}
		wantRefused(t, await(t, call), "not approved")
		gwClose(t, sess5)
		g.stop(t)
		revoked := false
		for _, r := range s.logs(t, "--event", "approval") {
			revoked = revoked || r.str("decision") == "revoked" && strings.Contains(r.String(), p5.str("id"))
		}
		if !revoked {
			t.Errorf("no audit record of the revoke while no serve ran")
		}
	})
}

// TestApprovalWebSocket: the dashboard endpoint, HTTP over the owner-only
// unix socket STATE_DIR/approvals.sock, lists a held call and decides it.
func TestApprovalWebSocket(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "approvals: {timeout: 1m}\n", auApproveBox)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		sock := filepath.Join(s.state, "approvals.sock")
		if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("approvals socket: %v %v, want mode 0600", fi, err)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			},
		}}
		call := callAsync(sess, "whoami", nil)
		var id string
		deadline := time.Now().Add(30 * time.Second)
		for id == "" && time.Now().Before(deadline) {
			resp, err := hc.Get("http://mcpbox/approvals")
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Pending []struct{ ID, Tool string } `json:"pending"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range body.Pending {
				if p.Tool == "whoami" {
					id = p.ID
				}
			}
			if id == "" {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if id == "" {
			t.Fatal("the held call never showed on the approvals socket")
		}
		resp, err := hc.Post("http://mcpbox/approvals/"+id, "application/json", strings.NewReader(`{"decision":"allow","scope":"once"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /approvals/%s: %s", id, resp.Status)
		}
		wantOK(t, await(t, call), auServer)
		g.stop(t)
		calls := s.calls(t, "whoami")
		if len(calls) != 1 || calls[0].str("approver") != "web" {
			t.Fatalf("call records: %v", calls)
		}
	})
}
