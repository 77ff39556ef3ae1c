// Command mcpbox runs MCP servers (or any command) in Linux sandboxes and
// stands between MCP clients and those servers as a policy gateway.
// See README.md and docs/.
package main

import (
	"os"

	"mcpbox/internal/cli"
	"mcpbox/internal/sandbox"
)

func main() {
	sandbox.Main() // the sandbox init is this binary re-executed
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
