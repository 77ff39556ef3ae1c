package main

import (
	"context"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerStat adds stat: what the server's sandbox shows at any path,
// for the tests of what a sandbox's system view holds (an image's root
// instead of the host's /usr).
func (s *server) registerStat() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: "stat", Description: "returns \"file\", \"dir\", \"other\" or \"missing\" for the path text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			fi, err := os.Lstat(in.Text)
			switch {
			case err != nil:
				return text("missing"), nil, nil
			case fi.IsDir():
				return text("dir"), nil, nil
			case fi.Mode().IsRegular():
				return text("file"), nil, nil
			}
			return text("other"), nil, nil
		})
}
