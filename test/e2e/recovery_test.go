package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Tests of recovery and of honest records (issue 22): a crashed server
// comes back by default and the client is told what happened; a command
// the built-in server refuses is audited as a denial with what it was
// asked to run; a tool is named as clients call it.

// TestCrashRestartsByDefault: a server with no lifecycle settings that
// exits during a call is restarted. The call it was serving fails with an
// error naming the server, how it ended and the restart; the next call
// reaches a new process; ps counts the restart and the audit has the
// decision.
func TestCrashRestartsByDefault(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", "    tools: {allow: [\"*\"]}\n") // no lifecycle: the default policy
		g := s.serve(t)
		defer g.stop(t)
		sess := s.connect(t, g, nil)
		defer gwClose(t, sess)
		before := gwMustCall(t, sess, "instance", nil, "")

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := gwCall(ctx, sess, "crash", nil)
		want := fmt.Sprintf("server %s is restarting after it exited with status 3 (restart 1 of 5)", auServer)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("the call the crash ended: %v, want an error saying %q", err, want)
		}
		// The first restart waits 250ms, which a call waits out.
		after, err := gwCall(ctx, sess, "instance", nil)
		if err != nil {
			t.Fatalf("the call after the crash: %v", err)
		}
		if after == before {
			t.Errorf("the call after the crash reached the same process (instance %s)", after)
		}

		r := s.cli(t, "ps", "--json", "--config", s.cfg)
		if r.code != 0 {
			t.Fatalf("mcpbox ps: %s", r)
		}
		var running, restarts int
		var exits []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var row struct {
				State    string
				Restarts *int
				Exit     string
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("ps line %q: %v", line, err)
			}
			if row.Restarts == nil {
				t.Fatalf("ps line without restarts: %s", line)
			}
			if row.State == "running" {
				running++
				restarts = *row.Restarts
			} else {
				exits = append(exits, row.Exit)
			}
		}
		// The crash is the server's own end, not a stop of mcpbox's
		// (which the gateway's reaction to it was once shown as).
		if len(exits) != 1 || !strings.HasPrefix(exits[0], "exited with status 3") {
			t.Errorf("ps: the crashed sandbox's exit %q, want one saying it exited with status 3:\n%s", exits, r.stdout)
		}
		if running != 1 || restarts != 1 {
			t.Errorf("ps: %d running sandboxes, restarts %d; want 1 running after 1 restart:\n%s", running, restarts, r.stdout)
		}
		recs := s.logs(t, "--event", "restart")
		for deadline := time.Now().Add(20 * time.Second); len(recs) == 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond) // the store writes in batches
			recs = s.logs(t, "--event", "restart")
		}
		if len(recs) != 1 {
			t.Fatalf("%d restart records, want 1: %v", len(recs), recs)
		}
		d, _ := recs[0]["detail"].(map[string]any)
		if recs[0].str("decision") != "restart" || recs[0].str("server") != auServer || d["restart"] != "1 of 5" ||
			!strings.Contains(recs[0].str("error"), "exited with status 3") {
			t.Errorf("restart record %v, want decision restart 1 of 5 after exit status 3", recs[0])
		}
	})
}

// TestBuiltinRefusalAuditedAsDenial: the built-in server's command policy
// refuses a command; the audit records that call as a policy denial with
// the deny rule and the argv (its token redacted), not as an allowed call
// with an error result. Every record names the tool as the client calls
// it, and `logs --tool` finds the calls by that name, by SERVER/TOOL and
// by the server's own name alike.
func TestBuiltinRefusalAuditedAsDenial(t *testing.T) {
	const prefix = "w_" // a prefix other than the default's, so a filter cannot guess it
	token := "ghp_" + strings.Repeat("A1b2C3d4", 5)[:36]
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := hsWriteConfig(t, m, gwDir(t, m), map[string]any{"ws": map[string]any{
			"builtin":    "workspace",
			"prefix":     prefix,
			"filesystem": map[string]any{"output": map[string]any{}},
			"tools":      map[string]any{"allow": []string{"*"}, "approve_annotations": []string{}},
			"commands":   map[string]any{"allow": []string{"echo", "git"}, "deny": []string{"git *push*"}},
		}})
		g := gwServe(t, m, cfg)
		defer g.stop(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		defer gwClose(t, sess)
		denied := []string{"git", "push", "https://x-access-token:" + token + "@github.com/o/r"}
		if _, err := gwCall(ctx, sess, prefix+"run_command", map[string]any{"argv": denied}); err == nil || !strings.Contains(err.Error(), `matches deny rule \"git *push*\"`) {
			t.Fatalf("git push: %v, want the deny rule", err)
		}
		if _, err := gwCall(ctx, sess, prefix+"run_command", map[string]any{"argv": []string{"echo", "hello"}}); err != nil {
			t.Fatalf("echo: %v", err)
		}
		gwMustCall(t, sess, prefix+"list_files", map[string]any{"path": "output"}, "")

		logs := func(filters ...string) []auRecord {
			r := m.mcpbox(t, 60*time.Second, "", append([]string{"logs", "--json", "--event", "call", "--config", cfg}, filters...)...)
			if r.code != 0 {
				t.Fatalf("mcpbox logs %v: %s", filters, r)
			}
			return auDecode(t, r.stdout)
		}
		// The store writes in batches: wait for the three call records.
		for deadline := time.Now().Add(20 * time.Second); len(logs()) < 3 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		recs := logs("--tool", prefix+"run_command")
		if len(recs) != 2 {
			t.Fatalf("logs --tool %srun_command: %d records, want 2: %v", prefix, len(recs), recs)
		}
		deny, allow := recs[0], recs[1]
		if deny.str("decision") != "deny" || deny.str("outcome") != "denied" || deny.str("rule") != `commands.deny "git *push*"` {
			t.Errorf("the refused command's record: %v, want decision deny, outcome denied, rule commands.deny \"git *push*\"", deny)
		}
		argv, _ := deny["argv"].([]any)
		if len(argv) != 3 || argv[0] != "git" || argv[1] != "push" || !strings.Contains(fmt.Sprint(argv[2]), "@github.com/o/r") {
			t.Errorf("the refused command's argv: %v, want git push and the URL", deny["argv"])
		}
		if strings.Contains(deny.String(), token) {
			t.Errorf("the refused command's record holds the token: %v", deny)
		}
		if allow.str("decision") != "allow" || allow.str("outcome") != "ok" || fmt.Sprint(allow["argv"]) != "[echo hello]" {
			t.Errorf("the allowed command's record: %v, want allow, ok, argv [echo hello]", allow)
		}
		for _, r := range recs {
			if r.str("name") != prefix+"run_command" || r.str("tool") != "run_command" || r.str("server") != "ws" {
				t.Errorf("record %v, want name %srun_command of ws/run_command", r, prefix)
			}
		}
		ids := func(recs []auRecord) []float64 {
			var out []float64
			for _, r := range recs {
				out = append(out, r.num("id"))
			}
			return out
		}
		for _, f := range []string{"ws/run_command", "run_command"} {
			if got := logs("--tool", f); !slices.Equal(ids(got), ids(recs)) {
				t.Errorf("logs --tool %s: records %v, want %v", f, ids(got), ids(recs))
			}
		}
		if got := logs("--tool", prefix+"list_files"); len(got) != 1 || got[0]["argv"] != nil {
			t.Errorf("logs --tool %slist_files: %v, want one record without argv", prefix, got)
		}
		// The text form names the tool the same way.
		r := m.mcpbox(t, 60*time.Second, "", "logs", "--tool", prefix+"run_command", "--config", cfg)
		if r.code != 0 || strings.Count(r.stdout, "tool="+prefix+"run_command ") != 2 || strings.Contains(r.stdout, token) {
			t.Errorf("logs text:\n%s\nwant two lines with tool=%srun_command and no token", r.stdout, prefix)
		}
	})
}
