package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"mcpbox/internal/config"
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
	// local are ~/.claude.json's projects with servers or a list of
	// disabled ones, in file order: a project's servers are for its
	// sessions only, so none is imported unless UseProject picks it
	// (project is the one picked; projectNotes say what that changed).
	local        []projectServers
	project      string
	projectNotes []string
}

// projectServers are one ~/.claude.json project's servers and the names
// of the servers Claude Code does not start there (disabledMcpServers,
// which /mcp writes).
type projectServers struct {
	dir      string
	entries  []member
	disabled []string
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
	var dirs []string
	for _, p := range cf.local {
		if len(p.entries) > 0 {
			dirs = append(dirs, p.dir)
		}
	}
	return dirs
}

// UseProject adds the servers of the ~/.claude.json project dir (an
// absolute path, as the file's keys are) to those imported: Claude Code
// runs them only in a session of that project, so an import takes them
// only when asked, one project at a time. As in Claude Code, a project's
// server replaces the user's of the same name, and the servers the
// project disables are left out. dir may come in several
// spellings (as given, with its links resolved): the first a key
// matches counts, a key as written before one that matches only once
// cleaned ("/p/" for "/p"). It fails when cf has no such project, when
// the cleaned spelling matches several keys, or when a project was
// picked already.
func (cf *ClientFile) UseProject(dir ...string) error {
	if cf.project != "" {
		return fmt.Errorf("%s: the servers of project %s are imported already", cf.name, config.PrintableLine(cf.project))
	}
	p, err := cf.findProject(dir)
	if err != nil {
		return err
	}
	project := config.PrintableLine(p.dir)
	for _, m := range p.entries {
		i := slices.IndexFunc(cf.entries, func(o member) bool { return o.key == m.key })
		switch {
		case i < 0:
			cf.entries = append(cf.entries, m)
		case !containsEntry(cf.entries[i:i+1], m): // not merely repeated in the project
			cf.entries[i] = m
			cf.projectNotes = append(cf.projectNotes, fmt.Sprintf("server %q of project %s replaces the user's server of that name, as in Claude Code", m.key, project))
		}
	}
	cf.entries = slices.DeleteFunc(cf.entries, func(m member) bool {
		if !slices.Contains(p.disabled, m.key) {
			return false
		}
		cf.projectNotes = append(cf.projectNotes, fmt.Sprintf("skipping server %q: project %s disables it (disabledMcpServers)", m.key, project))
		return true
	})
	cf.project = p.dir
	return nil
}

// findProject is the project of cf that one of dirs names (UseProject).
func (cf *ClientFile) findProject(dirs []string) (*projectServers, error) {
	for _, d := range dirs {
		for i := range cf.local {
			if cf.local[i].dir == d {
				return &cf.local[i], nil
			}
		}
	}
	for _, d := range dirs {
		var found []*projectServers
		for i := range cf.local {
			if filepath.Clean(cf.local[i].dir) == filepath.Clean(d) {
				found = append(found, &cf.local[i])
			}
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		}
		keys := make([]string, len(found))
		for i, p := range found {
			keys[i] = strconv.Quote(p.dir)
		}
		return nil, fmt.Errorf("%s: %s names several projects (%s): give the key as written", cf.name, config.PrintableLine(d), config.PrintableLine(strings.Join(keys, ", ")))
	}
	if len(cf.local) == 0 {
		return nil, fmt.Errorf("%s has no project with servers of its own", cf.name)
	}
	return nil, fmt.Errorf("%s has no project %s with servers (it has: %s)", cf.name, config.PrintableLine(dirs[0]),
		config.PrintableLine(strings.Join(cf.Projects(), ", ")))
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
		proj := projectServers{dir: p.key}
		for _, s := range ps {
			switch s.key {
			case "mcpServers":
				if proj.entries, err = cf.servers("projects."+p.key+".mcpServers", s.val); err != nil {
					return err
				}
				for i := range proj.entries {
					proj.entries[i].project = p.key
				}
			case "disabledMcpServers":
				_ = json.Unmarshal(s.val, &proj.disabled) // not a list of names: none disabled
			}
		}
		if len(proj.entries) > 0 || len(proj.disabled) > 0 {
			cf.local = append(cf.local, proj)
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
// repeats a user's server in a project, indented deeper there, so the
// entries are compared as JSON values, not as text.
func containsEntry(ms []member, m member) bool {
	var v any
	if json.Unmarshal(m.val, &v) != nil {
		return false
	}
	for _, o := range ms {
		var ov any
		if o.key == m.key && json.Unmarshal(o.val, &ov) == nil && reflect.DeepEqual(v, ov) {
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
