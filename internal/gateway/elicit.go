package gateway

import (
	"context"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// elicitor returns a function that asks this session's client to choose
// one of a few answers through a form elicitation, or nil when the client
// did not declare form elicitation (or negotiated a protocol without it).
// Declining the form is the answer "deny" when that is a choice;
// dismissing it (cancel) is no answer.
func (d *downstream) elicitor() func(ctx context.Context, message string, choices []string) (string, error) {
	d.mu.Lock()
	ss := d.ss
	d.mu.Unlock()
	if ss == nil {
		return nil
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil
	}
	if e := ip.Capabilities.Elicitation; e.Form == nil && e.URL != nil {
		return nil // URL mode only: a form would be refused
	}
	if ip.ProtocolVersion != "" && ip.ProtocolVersion < "2025-06-18" {
		return nil // elicitation came with 2025-06-18
	}
	return func(ctx context.Context, message string, choices []string) (string, error) {
		schema := map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "enum": choices},
			},
			"required": []string{"decision"},
		}
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: schema})
		if err != nil {
			return "", err
		}
		switch {
		case res.Action == "decline" && slices.Contains(choices, "deny"):
			return "deny", nil // the user said no to the whole question
		case res.Action != "accept":
			return "", nil // dismissed: no answer
		}
		choice, _ := res.Content["decision"].(string)
		if !slices.Contains(choices, choice) {
			return "", fmt.Errorf("elicitation answer %q is not one of the choices", choice)
		}
		return choice, nil
	}
}
