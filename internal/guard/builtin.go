package guard

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"mcpbox/internal/audit"
	"mcpbox/internal/builtin"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// Bounds of the argv an audit record keeps of one command.
const (
	maxAuditArgs   = 64
	maxAuditArgLen = 1024
)

// commandArgv is the argv of a run_command or start_job call to the
// built-in server, each argument redacted whole (configured secrets and
// credential-shaped strings) and then cut, for the audit; nil for every
// other call.
func (g *Guard) commandArgv(gs *guardServer, c *gateway.Call) []string {
	if gs == nil || !gs.builtin || (c.Tool != "run_command" && c.Tool != "start_job") {
		return nil
	}
	var args struct {
		Argv []string `json:"argv"`
	}
	if json.Unmarshal(c.Arguments, &args) != nil || len(args.Argv) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(args.Argv), maxAuditArgs+1))
	for i, a := range args.Argv {
		if i == maxAuditArgs {
			out = append(out, fmt.Sprintf("[%d more arguments]", len(args.Argv)-i))
			break
		}
		// Redacted before the cut: a cut first could leave the start of a
		// secret that the redactor no longer recognises. Besides the
		// configured secrets, credential-shaped strings (a token the agent
		// pasted into a URL) are masked: argv is the one place the audit
		// keeps argument values.
		out = append(out, cutUTF8(redact.MaskShaped(g.book.String(a)), maxAuditArgLen))
	}
	return out
}

// cutUTF8 cuts s to at most n bytes on a rune boundary, marking the cut.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// builtinRefusal records a command the built-in server's command policy
// refused (its result carries builtin.PolicyMeta) as a policy denial with
// the rule that made it. The marker is believed from the built-in server
// only: any other server could put it in a result to disguise a call.
func builtinRefusal(gs *guardServer, raw json.RawMessage, rec *audit.Record) {
	if gs == nil || !gs.builtin {
		return
	}
	var res struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &res) != nil || res.Meta[builtin.PolicyMeta] == nil {
		return
	}
	var mark struct {
		Decision string `json:"decision"`
		Rule     string `json:"rule"`
	}
	if json.Unmarshal(res.Meta[builtin.PolicyMeta], &mark) != nil || mark.Decision != "deny" {
		return
	}
	rec.Decision, rec.Outcome, rec.Rule = "deny", audit.OutcomeDenied, mark.Rule
}
