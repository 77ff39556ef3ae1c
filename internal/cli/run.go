package cli

import (
	"context"
	"path/filepath"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
)

const runHelp = `USAGE
  mcpbox run [flags] -- CMD [ARG...]

Runs ONE stdio MCP server in a sandbox and speaks MCP to the client on
standard input and output: a drop-in "command" for a client's mcpServers
configuration. The sandbox is the one 'mcpbox exec' builds from the same
flags; the gateway in front of it filters tools (--allow-tool, --deny-tool),
bounds calls (--call-timeout, --output-limit) and restarts the server when
it crashes. The server's stderr goes to mcpbox's stderr, line-prefixed.

run keeps no audit, asks for no approval (every call runs unreviewed,
whatever the tools' annotations), pins no tool definitions, and ps, logs,
approvals and ui do not see it. For those, put the server in an
mcpbox.yaml and use 'mcpbox serve --config FILE --stdio' ('mcpbox import'
writes one from a client's config).

EXAMPLE (claude_desktop_config.json)
  "filesystem": {"command": "mcpbox", "args": ["run", "--input", "/home/me/notes",
      "--mount", "/usr/local/lib/node_modules:/opt/node_modules", "--",
      "node", "/opt/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
      "/workspace/input"]}
`

func (e *env) run(args []string) int {
	fs := e.newFlagSet("run", runHelp)
	var f sandboxFlags
	f.register(fs)
	fs.Lookup("timeout").Usage = hiddenFlag // exec's: refused below, naming --call-timeout
	var (
		callTimeout time.Duration
		outputLimit string
		allow, deny listFlag
	)
	fs.DurationVar(&callTimeout, "call-timeout", 0, "cancel a tool call after `DURATION` (default: 5m)")
	fs.StringVar(&outputLimit, "output-limit", "", "largest tool result passed back, e.g. `1Mi` (default: none)")
	fs.Var(&allow, "allow-tool", "expose only tools matching `GLOB` (repeatable; default: all)")
	fs.Var(&deny, "deny-tool", "hide tools matching `GLOB` (repeatable)")
	if code, stop := e.parse(fs, args); stop {
		return code
	}
	if code, stop := e.localOnly("run"); stop {
		return code
	}
	argv, spec, ok := e.commandSpec(fs, &f, "run", "no server command given")
	if !ok {
		return exitUsage
	}
	if f.timeout > 0 {
		e.errorf("run: --timeout does not apply to a server; use --call-timeout")
		return exitUsage
	}
	spec.Args = argv
	var maxOut config.Size
	if outputLimit != "" {
		var err error
		if maxOut, err = config.ParseSize(outputLimit); err != nil {
			e.errorf("run: --output-limit: %v", err)
			return exitUsage
		}
	}
	err := daemon.RunServer(context.Background(), daemon.ServerOptions{
		Name: filepath.Base(argv[0]), Spec: *spec, Allow: allow, Deny: deny,
		CallTimeout: callTimeout, MaxOutput: int64(maxOut),
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr, Version: version(), StateDir: f.stateDir,
	})
	if err != nil {
		e.errorf("run: %v", err)
		return exitFor(err)
	}
	return 0
}
