package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// CredentialCheck is the Call hook of a gateway without a guard (`mcpbox
// run`): it applies a server's credentials policy (policy maps server
// names to config.Credentials*) to its tool results, as the guard's
// credentials stage does for serve.
func CredentialCheck(log *slog.Logger, policy map[string]string) func(context.Context, *gateway.Call, func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	check := chain(forward, credentials(log))
	return func(ctx context.Context, c *gateway.Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
		st := &callState{c: c, gs: &guardServer{credentials: policy[c.Server]}, rec: &audit.Record{}, next: next}
		return check(ctx, st)
	}
}

// applyCredentials applies a credentials policy (config.Credentials*;
// "" is flag) to a tool result: credential-shaped strings that are not
// our secrets (those are redacted already) are flagged in the log,
// redacted, or block the result. It returns the result to pass on, the
// rules that matched and whether it blocked. A match inside one of own,
// the placeholders the sandbox holds for its secrets added at the proxy,
// is none: mcpbox made them, and they are worth nothing outside.
func applyCredentials(log *slog.Logger, action string, c *gateway.Call, raw json.RawMessage, own []string) (json.RawMessage, []string, bool) {
	found := slices.DeleteFunc(redact.Detect(raw), func(f redact.Finding) bool { return inPlaceholder(raw, f, own) })
	if len(found) == 0 {
		return raw, nil, false
	}
	var rules []string
	for _, f := range found {
		if !slices.Contains(rules, f.Rule) {
			rules = append(rules, f.Rule)
		}
	}
	if action == "" {
		action = config.CredentialsFlag
	}
	log.Warn("credential-shaped string in a tool result", "server", c.Server, "tool", cmpOr(c.Name, c.Tool), "agent", c.Agent, "rules", strings.Join(rules, ","), "action", action)
	switch action {
	case config.CredentialsRedact:
		return redact.Mask(raw, found), rules, false
	case config.CredentialsBlock:
		res, _ := refusal(fmt.Sprintf("mcpbox: the result of %s was blocked: it contains what looks like a credential (%s)", cmpOr(c.Name, c.Tool), strings.Join(rules, ", ")), nil)
		return res, rules, true
	}
	return raw, rules, false
}

// inPlaceholder reports whether f's match lies inside an occurrence in
// raw of one of the placeholders own: one that starts in [f.End-len(p),
// f.Start], of which the first from that range's start is enough.
func inPlaceholder(raw []byte, f redact.Finding, own []string) bool {
	for _, p := range own {
		if p == "" || len(p) < f.End-f.Start {
			continue
		}
		from := max(f.End-len(p), 0)
		if i := bytes.Index(raw[from:], []byte(p)); i >= 0 && from+i <= f.Start {
			return true
		}
	}
	return false
}
