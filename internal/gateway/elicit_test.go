package gateway

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// choose turns the client's form answer into a choice, and passes an
// accepted decision on as given, a choice or not, for the asker to judge.
func TestChooseAnswers(t *testing.T) {
	choices := []string{"once", "session", "deny"}
	for _, tc := range []struct {
		name string
		res  *mcp.ElicitResult
		want string
	}{
		{"accepted choice", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "session"}}, "session"},
		{"declined", &mcp.ElicitResult{Action: "decline"}, "deny"},
		{"dismissed", &mcp.ElicitResult{Action: "cancel"}, ""},
		{"not offered", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "always"}}, "always"},
		{"no string", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": 42.0}}, "42"},
		{"missing", &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, "null"},
		{"empty", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": ""}}, `""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := choose(func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) { return tc.res, nil })
			got, err := ask(context.Background(), "approve?", choices)
			if err != nil || got != tc.want {
				t.Errorf("choice = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
