package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"mcpbox/internal/config"
)

const importHelp = `USAGE
  mcpbox import FILE [--rewrite-client-config [--config PATH] [--mcpbox PATH]]

Reads the MCP servers of a client's config file (FILE, or - for standard
input) and prints an mcpbox.yaml that runs each of them behind mcpbox:
  Claude Desktop   claude_desktop_config.json       mcpServers
  Claude Code      .mcp.json, ~/.claude.json         mcpServers, projects.*.mcpServers
  Cursor           .cursor/mcp.json                  mcpServers
  VS Code          .vscode/mcp.json                  servers
Comments and trailing commas (JSONC) are accepted.

A local (command) server runs in its own sandbox with no network, an empty
/workspace/input, a fresh /workspace/output and every tool allowed. A
comment suggests the egress rule where the command fetches its package at
start (npx, uvx, ...) and names host paths the sandbox does not see.
Credentials are never copied: an env value whose name contains TOKEN, KEY,
SECRET, PASSWORD, CREDENTIAL or PAT, or that has the shape of a token,
becomes a secret read from the environment variable of the same name; a
remote (url) server's header values become references to variables named
MCPBOX_SERVER_HEADER. A credential inside an argument or URL is replaced
by REDACTED. The variables to set are listed on standard error.

With --rewrite-client-config, prints FILE's JSON instead, with all its
servers replaced by one entry "mcpbox" that runs
  MCPBOX serve --config PATH --stdio
so that the client reaches every server through one gateway; with more
than one server, tool names get the prefix "SERVER__". Typical use:
  mcpbox import claude_desktop_config.json > ~/mcpbox.yaml
  mcpbox import claude_desktop_config.json --rewrite-client-config \
      --config ~/mcpbox.yaml > new_claude_desktop_config.json
`

// redacted replaces a credential found in an argument, URL or header.
const redacted = "REDACTED"

func (e *env) importConfig(args []string) int {
	fs := e.newFlagSet("import", importHelp)
	rewrite := fs.Bool("rewrite-client-config", false, "print the client's config rewritten to launch mcpbox, not the YAML")
	cfgPath := fs.String("config", "mcpbox.yaml", "with --rewrite-client-config: where the YAML will live (`PATH`, made absolute)")
	binPath := fs.String("mcpbox", "", "with --rewrite-client-config: the mcpbox binary (`PATH`; default: this one)")
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
	if len(files) != 1 {
		e.errorf("import: want exactly one FILE (a client's MCP config JSON), got %d", len(files))
		return exitUsage
	}
	data, err := e.readInput(files[0])
	if err != nil {
		e.errorf("import: %v", err)
		return exitUsage
	}
	cf, err := parseClientFile(files[0], data)
	if err != nil {
		e.errorf("import: %v", err)
		return exitUsage
	}
	im := newImporter()
	c, hints := im.convert(cf.entries)
	for _, n := range im.notes {
		fmt.Fprintf(e.stderr, "mcpbox: import: %s\n", n)
	}
	if len(c.Servers) == 0 {
		e.errorf("import: no server of %s could be imported", files[0])
		return exitUsage
	}
	var out []byte
	if *rewrite {
		out, err = e.rewriteClient(cf, *cfgPath, *binPath)
	} else {
		out, err = renderYAML(c, hints, files[0])
	}
	if err != nil {
		e.errorf("import: %v", err)
		return 1
	}
	im.printVars(e.stderr, *rewrite)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	_, _ = e.stdout.Write(out)
	return 0
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

// renderYAML prints c with a header comment and each server's hints as
// comments above its first key, then checks that the result loads.
func renderYAML(c *config.Config, hints map[string][]string, source string) ([]byte, error) {
	raw, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) != 1 {
		return nil, fmt.Errorf("re-reading generated YAML: %v", err)
	}
	doc.HeadComment = strings.Join([]string{
		"mcpbox.yaml imported by 'mcpbox import' from " + strconv.Quote(source) + ". Review it:",
		"every local server runs in its own sandbox with no network, an empty",
		"/workspace/input and a fresh /workspace/output; to let one read a host",
		"directory, add filesystem: {input: {source: DIR}}. Credentials were not",
		"copied: secrets and headers name environment variables to set before",
		"'mcpbox serve' (file:PATH and cmd:COMMAND references work too).",
		"tools: {allow: ['*']} keeps every tool of the servers you chose; narrow it.",
		"Calls of tools a server marks destructive or open-world wait for your",
		"approval (your client asks you, or: mcpbox approvals); add",
		"approve_annotations: [] under tools to run them unreviewed.",
		"Tool descriptions are pinned in mcpbox.lock on first use; a server that",
		"changes them later has those tools hidden until 'mcpbox trust'.",
	}, "\n")
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "servers" {
			continue
		}
		sm := root.Content[i+1]
		for j := 0; j+1 < len(sm.Content); j += 2 {
			if h, v := hints[sm.Content[j].Value], sm.Content[j+1]; len(h) > 0 && len(v.Content) > 0 {
				v.Content[0].HeadComment = strings.Join(h, "\n")
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if _, err := config.Load("mcpbox.yaml", buf.Bytes()); err != nil {
		return nil, fmt.Errorf("checking generated config: %w", err)
	}
	return buf.Bytes(), nil
}

// clientEntry is the one server entry of a rewritten client config.
type clientEntry struct {
	Type    string   `json:"type,omitempty"` // VS Code's servers want it
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// rewriteClient prints cf's JSON with its servers replaced by one mcpbox
// entry. The file's other top-level keys are kept, except for
// ~/.claude.json, whose other keys are the client's state: there only the
// mcpServers object is printed.
func (e *env) rewriteClient(cf *clientFile, cfgPath, bin string) ([]byte, error) {
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
	entry := clientEntry{Command: bin, Args: []string{"serve", "--config", abs, "--stdio"}}
	if cf.key == "servers" {
		entry.Type = "stdio"
	}
	servers, err := json.Marshal(map[string]clientEntry{"mcpbox": entry})
	if err != nil {
		return nil, fmt.Errorf("encoding client entry: %w", err)
	}
	top := []member{{key: cf.key, val: servers}}
	if cf.projects {
		fmt.Fprintf(e.stderr, "mcpbox: import: %s holds the client's state besides servers: merge this mcpServers object into it (or a project's .mcp.json) by hand, removing the servers it replaces\n", cf.name)
	} else {
		top = replaceServers(cf.top, cf.keys, servers)
	}
	var compact, out bytes.Buffer
	compact.WriteByte('{')
	for i, m := range top {
		if i > 0 {
			compact.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		compact.Write(k)
		compact.WriteByte(':')
		if err := json.Compact(&compact, m.val); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", m.key, err)
		}
	}
	compact.WriteByte('}')
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("encoding client config: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// replaceServers puts val in place of the first key of ms that holds
// servers and drops the others, whose servers mcpbox now runs.
func replaceServers(ms []member, keys []string, val json.RawMessage) []member {
	out := make([]member, 0, len(ms))
	done := false
	for _, m := range ms {
		if slices.Contains(keys, m.key) {
			if done {
				continue
			}
			m.val, done = val, true
		}
		out = append(out, m)
	}
	return out
}

// printVars lists the environment variables the generated config reads.
func (im *importer) printVars(w io.Writer, rewrite bool) {
	if len(im.vars) == 0 {
		return
	}
	where := "mcpbox serve"
	if rewrite {
		where = `mcpbox serve (for the client's "mcpbox" entry: its "env")`
	}
	fmt.Fprintf(w, "mcpbox: import: set these variables in the environment of %s:\n", where)
	for _, v := range im.vars {
		fmt.Fprintf(w, "  %s\t%s\n", v.name, v.use)
	}
}

// member is one key of a JSON object, kept in file order.
type member struct {
	key string
	val json.RawMessage
}
