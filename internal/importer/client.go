package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// members returns the keys of a JSON object in order; a later duplicate
// replaces the earlier value, as JavaScript's JSON.parse does. null is an
// empty object.
func members(raw json.RawMessage) ([]member, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want a JSON object")
	}
	var ms []member
	idx := make(map[string]int)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		if i, ok := idx[k]; ok {
			ms[i].val = v
			continue
		}
		idx[k] = len(ms)
		ms = append(ms, member{key: k, val: v})
	}
	return ms, nil
}

// member is one key of a JSON object, kept in file order.
type member struct {
	key string
	val json.RawMessage
	// project is the ~/.claude.json project whose mcpServers hold the
	// entry; "" for a top-level one.
	project string
}

// ClientFile is a parsed client config: its top-level keys in file order
// and its server entries, for Convert and Rewrite.
type ClientFile struct {
	name     string
	top      []member // the file's top-level keys
	key      string   // "mcpServers" or "servers" (VS Code): the first one present
	keys     []string // every top-level key that holds servers
	projects bool     // ~/.claude.json: servers also under projects.*.mcpServers
	entries  []member // the servers to import: name and entry, in file order
	// local are ~/.claude.json's projects with servers, in file order: a
	// project's servers are for its sessions only, so none is imported
	// unless UseProject picks it (project is the one picked).
	local   []projectServers
	project string
}

// projectServers are the servers of one ~/.claude.json project.
type projectServers struct {
	dir     string
	entries []member
}

// ParseClientFile parses a client's config (JSON or JSONC) named name, as
// errors call it. It fails when data is no JSON object or holds no server
// entry under mcpServers, servers or projects.*.mcpServers.
func ParseClientFile(name string, data []byte) (*ClientFile, error) {
	data = stripJSONC(data)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, jsonError(name, data, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: want a JSON object with mcpServers or servers", name)
	}
	top, err := members(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cf := &ClientFile{name: name, top: top, key: "mcpServers"}
	for _, m := range top {
		switch m.key {
		case "mcpServers", "servers":
			if len(cf.keys) == 0 {
				cf.key = m.key
			}
			cf.keys = append(cf.keys, m.key)
			err = cf.addServers(m.key, m.val)
		case "projects":
			cf.projects = true
			err = cf.addProjects(m.val)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(cf.entries) == 0 && len(cf.local) == 0 {
		return nil, fmt.Errorf("%s: no MCP servers found (looked for mcpServers, servers and projects.*.mcpServers)", name)
	}
	return cf, nil
}

// Projects lists the ~/.claude.json projects that have servers of their
// own, in file order.
func (cf *ClientFile) Projects() []string {
	dirs := make([]string, len(cf.local))
	for i, p := range cf.local {
		dirs[i] = p.dir
	}
	return dirs
}

// UseProject adds the servers of the ~/.claude.json project dir (an
// absolute path, as the file's keys are) to those imported: Claude Code
// runs them only in a session of that project, so an import takes them
// only when asked, one project at a time. It fails when cf has no such
// project, or a project was picked already.
func (cf *ClientFile) UseProject(dir string) error {
	if cf.project != "" {
		return fmt.Errorf("%s: the servers of project %s are imported already", cf.name, cf.project)
	}
	for _, p := range cf.local {
		if filepath.Clean(p.dir) != filepath.Clean(dir) {
			continue
		}
		for _, m := range p.entries {
			if !containsEntry(cf.entries, m) { // a user server repeated in the project
				cf.entries = append(cf.entries, m)
			}
		}
		cf.project = p.dir
		return nil
	}
	if len(cf.local) == 0 {
		return fmt.Errorf("%s has no project with servers of its own", cf.name)
	}
	return fmt.Errorf("%s has no project %s with servers (it has: %s)", cf.name, dir, strings.Join(cf.Projects(), ", "))
}

// addProjects adds the servers of ~/.claude.json's projects.*.mcpServers.
func (cf *ClientFile) addProjects(raw json.RawMessage) error {
	projects, err := members(raw)
	if err != nil {
		return fmt.Errorf("%s: projects: %w", cf.name, err)
	}
	for _, p := range projects {
		ps, err := members(p.val)
		if err != nil {
			return fmt.Errorf("%s: projects.%s: %w", cf.name, p.key, err)
		}
		for _, s := range ps {
			if s.key != "mcpServers" {
				continue
			}
			ms, err := cf.servers("projects."+p.key+".mcpServers", s.val)
			if err != nil {
				return err
			}
			if len(ms) > 0 {
				for i := range ms {
					ms[i].project = p.key
				}
				cf.local = append(cf.local, projectServers{dir: p.key, entries: ms})
			}
		}
	}
	return nil
}

// addServers adds the entries of the top-level servers object at path,
// skipping one seen already.
func (cf *ClientFile) addServers(path string, raw json.RawMessage) error {
	ms, err := cf.servers(path, raw)
	for _, m := range ms {
		if !containsEntry(cf.entries, m) {
			cf.entries = append(cf.entries, m)
		}
	}
	return err
}

// servers returns the entries of the servers object at path.
func (cf *ClientFile) servers(path string, raw json.RawMessage) ([]member, error) {
	ms, err := members(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w of servers", cf.name, path, err)
	}
	return ms, nil
}

// containsEntry reports whether ms has m already: ~/.claude.json often
// repeats a user's server in a project.
func containsEntry(ms []member, m member) bool {
	for _, o := range ms {
		if o.key == m.key && bytes.Equal(o.val, m.val) {
			return true
		}
	}
	return false
}

// stripJSONC blanks out // and /* */ comments and trailing commas, as VS
// Code's JSONC allows, keeping every other byte where it was so that
// error offsets still point into the file.
func stripJSONC(b []byte) []byte {
	out := bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	out = append([]byte(nil), out...)
	inStr, comma := false, -1
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr, comma = true, -1
		case c == '/' && i+1 < len(out) && (out[i+1] == '/' || out[i+1] == '*'):
			end := len(out)
			if out[i+1] == '/' {
				if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
					end = i + j
				}
			} else if j := bytes.Index(out[i+2:], []byte("*/")); j >= 0 {
				end = i + 2 + j + 2
			}
			for k := i; k < end; k++ {
				if out[k] != '\n' {
					out[k] = ' '
				}
			}
			i = end - 1
		case c == ',':
			comma = i
		case c == '}' || c == ']':
			if comma >= 0 {
				out[comma] = ' '
			}
			comma = -1
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		default:
			comma = -1
		}
	}
	return out
}

// jsonError adds the line and column to a JSON decoding error.
func jsonError(name string, data []byte, err error) error {
	off := int64(-1)
	switch e := err.(type) {
	case *json.SyntaxError:
		off = e.Offset - 1
	case *json.UnmarshalTypeError:
		off = e.Offset - 1
	}
	if off < 0 || off > int64(len(data)) {
		return fmt.Errorf("%s: invalid JSON: %v", name, err)
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("%s:%d:%d: invalid JSON: %v", name, line, col, err)
}

// mcpEntry is one server of a client config; which keys are set decides
// between a local (command) and a remote (url) server.
type mcpEntry struct {
	Type     string          `json:"type"` // VS Code, Claude Code: stdio, http, sse
	Command  string          `json:"command"`
	Args     []string        `json:"args"`
	Env      json.RawMessage `json:"env"`
	URL      string          `json:"url"`
	Headers  json.RawMessage `json:"headers"`
	Cwd      string          `json:"cwd"`
	EnvFile  string          `json:"envFile"`
	Disabled bool            `json:"disabled"`
}

// Var is an environment variable the generated config reads.
type Var struct {
	Name string // the variable's name
	Use  string // where the config reads it, e.g. "servers.a.secrets.API_KEY"
	// Client is the value as the client wrote it when the client fills
	// it in from its own inputs (VS Code's "${input:ID}", "Bearer
	// ${input:ID}"), else "": a rewritten client config passes it to
	// mcpbox in the entry's env, so the client still asks for it.
	Client string
}

// converter turns client entries into servers, collecting notes for the
// user and the variables the config will read.
type converter struct {
	names   map[string]bool   // server names taken
	claimed map[string]string // variable -> the value it stands for
	vars    []Var
	notes   []string
	skipped []string // Result.Skipped
	homes   []string // Host.Homes
}
