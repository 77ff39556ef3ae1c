package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawArgs is the attack of the review: integers past float64's 53 bits,
// which a decode into map[string]any and back would round, and text that
// a decode and encode would rewrite.
const rawArgs = `{"amount":12345678901234567890,"acct":9007199254740993,"n":[18446744073709551617,-0.0,1.10,1e2],"o":{"big":123456789012345678901234567890},"s":"caf\u00e9 \\ \ud83d\ude00"}`

// TestArgumentsPassThrough: a call's arguments reach a go-sdk server
// byte for byte, with and without a Call hook (the policy and approval
// seam), and the hook sees the same bytes the server gets.
func TestArgumentsPassThrough(t *testing.T) {
	rawTool := func(Scope) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "raw", Version: "1"}, nil)
		srv.AddTool(&mcp.Tool{Name: "raw", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
			})
		return srv
	}
	for _, hooked := range []bool{false, true} {
		var seen json.RawMessage
		var opts Options
		if hooked {
			opts.Hooks.Call = func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
				seen = c.Arguments
				return next(ctx)
			}
		}
		gw, err := New([]*Server{{Name: "raw", Launch: sdkLauncher(rawTool, nil, nil), Allow: []string{"*"}}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		c := newRawClient(t, gw)
		msg, line := c.call("tools/call", map[string]any{"name": "raw", "arguments": json.RawMessage(rawArgs)})
		var got string
		if res, ok := msg["result"].(map[string]any); ok {
			if content, ok := res["content"].([]any); ok && len(content) == 1 {
				got, _ = content[0].(map[string]any)["text"].(string)
			}
		}
		if got != rawArgs {
			t.Errorf("hook %v: the server got arguments\n%s\nwant\n%s\n(response %s)", hooked, got, rawArgs, line)
		}
		if hooked && string(seen) != rawArgs {
			t.Errorf("the Call hook saw %s, want %s", seen, rawArgs)
		}
		gw.Close()
	}
}
