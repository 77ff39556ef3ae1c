package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"mcpbox/internal/config"
)

// Render prints res.Config as mcpbox.yaml: a header comment naming source
// (the client file) and each server's hints as comments above its first
// key. It fails when the result does not load as a config.
func Render(res *Result, source string) ([]byte, error) {
	raw, err := res.Config.Marshal()
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
		"copied (but a key in a remote server's URL path: see its comment):",
		"secrets, headers and query name environment variables to set before",
		"'mcpbox serve' (file:PATH and cmd:COMMAND references work too).",
		"tools: {allow: ['*']} keeps every tool of the servers you chose; narrow it.",
		"Calls of tools that a server marks destructive or open-world, or does",
		"not mark at all (MCP then assumes both), wait for your approval (your",
		"client asks you, or: mcpbox approvals); allow the safe ones with rules",
		"({tool: NAME, action: allow}) or add approve_annotations: [] under",
		"tools to run every call unreviewed.",
		"Tool descriptions are pinned in the lock file beside this config",
		"(mcpbox.lock for mcpbox.yaml) on first use; a server that",
		"changes them later has those tools hidden until 'mcpbox trust'.",
	}, "\n")
	addHints(doc.Content[0], res.Hints)
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

// addHints puts each server's hints as a comment above its first key.
func addHints(root *yaml.Node, hints map[string][]string) {
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
}

// RewriteOptions say what the one entry of a rewritten client config
// runs: Binary serve --config Config --stdio.
type RewriteOptions struct {
	// Binary is the mcpbox binary the client starts. Required.
	Binary string
	// Config is the path of the generated mcpbox.yaml, as the client's
	// process will see it (so: absolute). Required.
	Config string
	// Keep names top-level entries kept as they were beside "mcpbox":
	// those the import left out (Result.Skipped), which mcpbox does not
	// run, so the client still does.
	Keep []string
	// Env is the entry's env: the variables the client fills in from its
	// own inputs (Result.ClientEnv), which the servers' entries had and
	// mcpbox now reads.
	Env map[string]string
}

// clientEntry is the one server entry of a rewritten client config.
type clientEntry struct {
	Type    string            `json:"type,omitempty"` // VS Code's servers want it
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

// Rewrite prints cf's JSON with its servers replaced by one entry
// "mcpbox" that runs o.Binary serve --config o.Config --stdio. The file's
// other top-level keys are kept, except for ~/.claude.json, whose other
// keys are the client's state: there only the mcpServers object is
// printed, with a note saying what to do with it.
func Rewrite(cf *ClientFile, o RewriteOptions) (out []byte, notes []string, err error) {
	if o.Binary == "" || o.Config == "" {
		return nil, nil, fmt.Errorf("rewriting %s: want both the mcpbox binary and the config path", cf.name)
	}
	entry := clientEntry{Command: o.Binary, Args: []string{"serve", "--config", o.Config, "--stdio"}, Env: o.Env}
	if cf.key == "servers" {
		entry.Type = "stdio"
	}
	if len(o.Env) > 0 {
		notes = append(notes, "the \"mcpbox\" entry's env passes "+strings.Join(slices.Sorted(maps.Keys(o.Env)), ", ")+
			" from the client's inputs, which it still asks for")
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding client entry: %w", err)
	}
	entries := []member{{key: "mcpbox", val: raw}}
	var kept []string
	for _, m := range cf.entries {
		if m.project != "" || !slices.Contains(o.Keep, m.key) {
			continue
		}
		if m.key == "mcpbox" {
			notes = append(notes, `the entry "mcpbox" that the import left out is not kept: the rewritten config's own entry takes its name`)
			continue
		}
		entries = append(entries, m)
		kept = append(kept, strconv.Quote(m.key))
	}
	if len(kept) > 0 {
		notes = append(notes, "kept as they were, for the client to run itself (mcpbox does not run them): "+strings.Join(kept, ", "))
	}
	servers, err := encodeObject(entries)
	if err != nil {
		return nil, nil, err
	}
	top := []member{{key: cf.key, val: servers}}
	if cf.project != "" {
		notes = append(notes, cf.name+" holds the client's state besides servers: merge this mcpServers object into its project "+
			config.PrintableLine(cf.project)+" by hand (projects, that key, mcpServers), removing there the servers it replaces. "+
			"Its gateway runs the user's servers too, and its \"mcpbox\" entry overrides a top-level one in that project: so that the project "+
			"does not also run the user's servers outside mcpbox, replace them at the top level with the \"mcpbox\" entry of the same import without --project, "+
			"which keeps them for the other projects")
	} else if cf.projects {
		notes = append(notes, cf.name+" holds the client's state besides servers: merge this mcpServers object into it (or a project's .mcp.json) by hand, removing the servers it replaces")
	} else {
		top = replaceServers(cf.top, cf.keys, servers)
	}
	out, err = encodeObject(top)
	return out, notes, err
}

// encodeObject prints ms as one indented JSON object, keys in order.
func encodeObject(ms []member) ([]byte, error) {
	var compact, out bytes.Buffer
	compact.WriteByte('{')
	for i, m := range ms {
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

// WriteVars lists for the user the environment variables the imported
// config reads; rewrite says the client's "mcpbox" entry starts serve.
func WriteVars(w io.Writer, vars []Var, rewrite bool) {
	if len(vars) == 0 {
		return
	}
	where := "mcpbox serve"
	if rewrite {
		where = `mcpbox serve (for the client's "mcpbox" entry: its "env")`
	}
	fmt.Fprintf(w, "mcpbox: import: set these variables in the environment of %s:\n", where)
	for _, v := range vars {
		fmt.Fprintf(w, "  %s\t%s\n", v.Name, v.Use)
	}
}
