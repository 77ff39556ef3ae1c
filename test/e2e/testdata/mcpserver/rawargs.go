package main

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerRawArgs adds rawargs, which returns its arguments exactly as
// they arrived on the wire (no decoding), so a test can check that the
// gateway passed them through byte for byte.
func (s *server) registerRawArgs() {
	s.srv.AddTool(&mcp.Tool{Name: "rawargs", Description: "returns its arguments as received", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(req.Params.Arguments)), nil
		})
}
