package guard

import (
	"encoding/json"
	"strings"
	"testing"

	"mcpbox/internal/audit"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// TestBuiltinRefusalAudited: a refusal the built-in server marks is
// recorded as a policy denial with its rule; the same marker from any
// other server changes nothing (a server cannot pass its calls off as
// refused), nor does an unmarked error result.
func TestBuiltinRefusalAudited(t *testing.T) {
	marked := json.RawMessage(`{"content":[{"type":"text","text":"refused"}],"isError":true,"_meta":{"mcpbox/policy":{"decision":"deny","rule":"commands.deny \"rm\""}}}`)
	plain := json.RawMessage(`{"content":[{"type":"text","text":"exit code 3"}],"isError":true}`)
	tests := []struct {
		name                    string
		gs                      *guardServer
		raw                     json.RawMessage
		decision, outcome, rule string
	}{
		{"built-in marker", &guardServer{builtin: true}, marked, "deny", "denied", `commands.deny "rm"`},
		{"third-party marker", &guardServer{}, marked, "allow", "is_error", ""},
		{"built-in error without marker", &guardServer{builtin: true}, plain, "allow", "is_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := audit.Record{Decision: "allow", Outcome: "is_error"}
			builtinRefusal(tt.gs, tt.raw, &rec)
			if rec.Decision != tt.decision || rec.Outcome != tt.outcome || rec.Rule != tt.rule {
				t.Errorf("decision %q outcome %q rule %q; want %q %q %q", rec.Decision, rec.Outcome, rec.Rule, tt.decision, tt.outcome, tt.rule)
			}
		})
	}
}

// TestCommandArgvAudited: the argv of the built-in server's command
// tools is kept for the audit with secrets redacted and long values cut;
// other tools and other servers keep none.
func TestCommandArgvAudited(t *testing.T) {
	const secret = "s3cr3t-token-value-0123456789"
	book := &redact.Book{}
	if err := book.Add("TOKEN", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	g := &Guard{book: book}
	long := strings.Repeat("x", 3*maxAuditArgLen)
	pasted := "ghp_" + strings.Repeat("Z9y8", 9) // credential-shaped, no configured secret
	args, _ := json.Marshal(map[string]any{"argv": []string{"curl", "-H", "Authorization: Bearer " + secret, long, "https://u:" + pasted + "@example.com/"}})
	builtinGS, other := &guardServer{builtin: true}, &guardServer{}

	got := g.commandArgv(builtinGS, &gateway.Call{Tool: "run_command", Arguments: args})
	if len(got) != 5 || got[0] != "curl" || got[1] != "-H" {
		t.Fatalf("argv %q, want curl -H ...", got)
	}
	if strings.Contains(strings.Join(got, " "), secret) || !strings.HasPrefix(got[2], "Authorization: Bearer ") {
		t.Errorf("argv %q: the secret is not redacted", got[2])
	}
	if len(got[3]) > maxAuditArgLen+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(got[3], "…")) {
		t.Errorf("a %d-byte argument kept as %d bytes, want it cut to %d", len(long), len(got[3]), maxAuditArgLen)
	}
	if strings.Contains(got[4], pasted) || !strings.HasSuffix(got[4], "@example.com/") {
		t.Errorf("argv %q: the pasted token is not masked", got[4])
	}
	if got := g.commandArgv(builtinGS, &gateway.Call{Tool: "start_job", Arguments: args}); len(got) != 5 {
		t.Errorf("start_job argv %q, want it kept", got)
	}
	if got := g.commandArgv(builtinGS, &gateway.Call{Tool: "write_file", Arguments: args}); got != nil {
		t.Errorf("write_file kept argv %q", got)
	}
	if got := g.commandArgv(other, &gateway.Call{Tool: "run_command", Arguments: args}); got != nil {
		t.Errorf("a third-party run_command kept argv %q", got)
	}
	many := make([]string, 3*maxAuditArgs)
	for i := range many {
		many[i] = "a"
	}
	args, _ = json.Marshal(map[string]any{"argv": many})
	if got := g.commandArgv(builtinGS, &gateway.Call{Tool: "run_command", Arguments: args}); len(got) != maxAuditArgs+1 || !strings.Contains(got[maxAuditArgs], "more arguments") {
		t.Errorf("%d arguments kept as %d, want %d and a count", len(many), len(got), maxAuditArgs+1)
	}
}
