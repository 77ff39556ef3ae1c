package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
	"mcpbox/internal/importer"
)

const importHelp = `USAGE
  mcpbox import FILE [--project DIR] [--rewrite-client-config [--config PATH] [--mcpbox PATH]]

Reads the MCP servers of a client's config file (FILE, or - for standard
input) and prints an mcpbox.yaml that runs each of them behind mcpbox:
  Claude Desktop   claude_desktop_config.json       mcpServers
  Claude Code      .mcp.json, ~/.claude.json         mcpServers, projects.*.mcpServers
  Cursor           .cursor/mcp.json                  mcpServers
  VS Code          .vscode/mcp.json                  servers
Comments and trailing commas (JSONC) are accepted. Of ~/.claude.json, the
user's servers are imported, and with --project DIR also the servers of
that project, which Claude Code runs only in its sessions.

A local (command) server runs in its own sandbox with no network, an empty
/workspace/input, a fresh /workspace/output and every tool allowed; an
npx, uvx, pnpm dlx or pipx run entry becomes a package: server (installed
outside the sandbox, pinned in the lock file), its host directory arguments
read-only mounts. A comment says what changed and names host paths the
sandbox does not see.
Credentials are not copied: an env value whose name contains TOKEN, KEY,
SECRET, PASSWORD, CREDENTIAL, SESSION, COOKIE or AUTHORIZATION, or has
the word PAT, AUTH, DSN or PASS, or whose value has the shape of a token
or a random key (a UUID, 32 hex digits, a long mixed string), becomes a
secret read from the environment variable of the same name; a
remote (url) server's header values and credential query parameters
become references to variables named MCPBOX_SERVER_NAME (headers:, query:).
Another credential inside an argument or a URL's password is replaced by
REDACTED. A key in a URL's path stays (a path takes no reference; serve
redacts it): a note says so. The variables to set are listed on stderr.

With --rewrite-client-config, prints FILE's JSON instead, with the
servers it imports replaced by one entry "mcpbox" (those it left out,
disabled or not importable, stay as they were) that runs
  MCPBOX serve --config PATH --stdio
so that the client reaches every server through one gateway; with more
than one server, tool names get the prefix "SERVER__". Typical use:
  mcpbox import claude_desktop_config.json > ~/mcpbox.yaml
  mcpbox import claude_desktop_config.json --rewrite-client-config \
      --config ~/mcpbox.yaml > new_claude_desktop_config.json
`

func (e *env) importConfig(args []string) int {
	fs := e.newFlagSet("import", importHelp)
	rewrite := fs.Bool("rewrite-client-config", false, "print the client's config rewritten to launch mcpbox, not the YAML")
	cfgPath := fs.String("config", "mcpbox.yaml", "with --rewrite-client-config: where the YAML will live (`PATH`, made absolute)")
	binPath := fs.String("mcpbox", "", "with --rewrite-client-config: the mcpbox binary (`PATH`; default: this one)")
	var project listFlag
	fs.Var(&project, "project", "~/.claude.json: also import the servers of the project in `DIR`")
	var files []string
	for rest := args; ; rest = fs.Args()[1:] {
		if code, stop := e.parse(fs, rest); stop {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
	}
	if len(files) != 1 || len(project) > 1 {
		e.errorf("import: want exactly one FILE (a client's MCP config JSON), got %d, and one --project at most", len(files))
		return exitUsage
	}
	data, err := e.readInput(files[0])
	if err != nil {
		e.errorf("import: %v", err)
		return exitUsage
	}
	if len(bytes.TrimSpace(data)) == 0 {
		// "import X --rewrite-client-config > X": the shell empties X first.
		e.errorf("import: %s is empty (if it was the file this command's output was redirected to, the shell emptied it before mcpbox read it: write to another file, then move it over)", files[0])
		return exitUsage
	}
	cf, err := importer.ParseClientFile(files[0], data)
	if err == nil && len(project) == 1 {
		dir, _ := filepath.Abs(project[0])
		resolved, _ := filepath.EvalSymlinks(dir) // the key Claude Code wrote may be either
		err = cf.UseProject(dir, resolved)
	}
	if err != nil {
		e.errorf("import: %v", err)
		return exitUsage
	}
	host := importer.Host{Homes: daemon.Homes(), HoldsData: daemon.HoldsData, IsDir: daemon.IsDir}
	res := importer.Convert(cf, host)
	importer.ConvertPackages(res, daemon.PackageOf, host)
	e.importNotes(append(res.Notes, daemon.ImportNotes(res.Config)...))
	if len(res.Config.Servers) == 0 {
		e.errorf("import: no server of %s could be imported", files[0])
		return exitUsage
	}
	var out []byte
	if *rewrite {
		out, err = e.rewriteClient(cf, *cfgPath, *binPath, res)
	} else {
		out, err = importer.Render(res, files[0])
	}
	if err != nil {
		e.errorf("import: %v", err)
		return 1
	}
	importer.WriteVars(e.stderr, res.Vars, *rewrite)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	_, _ = e.stdout.Write(out)
	return 0
}

func (e *env) importNotes(notes []string) {
	for _, n := range notes {
		fmt.Fprintf(e.stderr, "mcpbox: import: %s\n", config.PrintableLine(n)) // names the client file chose
	}
}

func (e *env) readInput(name string) ([]byte, error) {
	if name == "-" {
		data, err := io.ReadAll(e.stdin)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading client config: %w", err)
	}
	return data, nil
}

// rewriteClient resolves --config (made absolute, ~/ expanded) and
// --mcpbox (default: this binary) and rewrites cf to launch mcpbox,
// keeping the entries the import left out and passing on the variables
// the client fills in from its inputs.
func (e *env) rewriteClient(cf *importer.ClientFile, cfgPath, bin string, res *importer.Result) ([]byte, error) {
	if rest, ok := strings.CutPrefix(cfgPath, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			cfgPath = filepath.Join(home, rest)
		}
	}
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("resolving --config: %w", err)
	}
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding the mcpbox binary (give --mcpbox): %w", err)
		}
	}
	out, notes, err := importer.Rewrite(cf, importer.RewriteOptions{Binary: bin, Config: abs, Keep: res.Skipped, Env: res.ClientEnv()})
	e.importNotes(notes)
	return out, err
}
