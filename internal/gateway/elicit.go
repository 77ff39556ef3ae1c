package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// elicitor returns a function that asks this session's client to choose
// one of a few answers through a form elicitation, or nil when the client
// did not declare form elicitation (or negotiated a protocol without it).
// Declining the form is the answer "deny" when that is a choice;
// dismissing it (cancel) is no answer. An accepted form's decision is
// returned as the client gave it, a choice or not (a value that is no
// string, or the empty one, as its JSON): whoever asked judges it.
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
	return choose(ss.Elicit)
}

// choose makes the choice function of an elicitor from how it sends a
// form elicitation.
func choose(elicit func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)) func(ctx context.Context, message string, choices []string) (string, error) {
	return func(ctx context.Context, message string, choices []string) (string, error) {
		schema := map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "enum": choices},
			},
			"required": []string{"decision"},
		}
		res, err := elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: schema})
		if err != nil {
			return "", err
		}
		switch {
		case res.Action == "decline" && slices.Contains(choices, "deny"):
			return "deny", nil // the user said no to the whole question
		case res.Action != "accept":
			return "", nil // dismissed: no answer
		}
		if choice, ok := res.Content["decision"].(string); ok && choice != "" {
			return choice, nil
		}
		b, err := json.Marshal(res.Content["decision"])
		if err != nil {
			return "", fmt.Errorf("elicitation answer: %w", err)
		}
		return string(b), nil
	}
}

// modernElicitor is elicitor for a 2026 client's call: the form goes to
// the client as the input request of an input_required result (mrtr.go),
// and the answer comes with its retry, under a requestState bound to the
// client, the tool and the exact arguments, single-use and expiring. Nil
// when the request did not declare elicitation, or runs unparked.
func (d *downstream) modernElicitor(ctx context.Context) func(ctx context.Context, message string, choices []string) (string, error) {
	p := parkedOf(ctx)
	if p == nil || !p.caps["elicitation"] {
		return nil
	}
	return choose(func(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		params.Mode = "form"
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		out, err := p.ask(ctx, "elicitation/create", raw)
		if err != nil {
			return nil, err
		}
		var res mcp.ElicitResult
		if err := json.Unmarshal(out, &res); err != nil {
			return nil, fmt.Errorf("bad elicitation answer: %w", err)
		}
		return &res, nil
	})
}
