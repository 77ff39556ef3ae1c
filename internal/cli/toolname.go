package cli

import (
	"strings"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/integrity"
)

// A tool has one spelling wherever a human reads it: the name the client
// calls it by, its server's prefix followed by the server's own name
// ("github__create_issue"). Prompts carry the prefix too; templates,
// instructions and server info have no client-visible name and are shown
// as SERVER/KEY. Admin commands that take a tool accept that name as well
// as SERVER/TOOL.

// itemName is how a definition (key, of an integrity kind: tool, prompt,
// template, ...) of server, whose prefix is prefix, is shown.
func itemName(server, prefix, kind, key string) string {
	switch kind {
	case integrity.KindTool, integrity.KindPrompt:
		return prefix + key
	}
	return server + "/" + key
}

// prefixes maps each server of c to its effective prefix.
func prefixes(c *config.Config) map[string]string {
	out := make(map[string]string, len(c.Servers))
	for _, s := range c.Servers {
		out[s.Name] = c.EffectivePrefix(s)
	}
	return out
}

// resolveTool reads a tool as an admin command was given it: SERVER/TOOL,
// or the client-visible name, which maps to at most one server since
// prefixes are prefix-free. ok is false when name is neither.
func resolveTool(name string, prefixes map[string]string) (server, tool string, ok bool) {
	if s, t, found := strings.Cut(name, "/"); found {
		if _, known := prefixes[s]; !known || t == "" {
			return "", "", false
		}
		return s, t, true
	}
	for s, p := range prefixes {
		if t, found := strings.CutPrefix(name, p); found && t != "" {
			return s, t, true
		}
	}
	return "", "", false
}

// toolFilter is `logs --tool NAME`: SERVER/TOOL selects by server and
// tool in the query; any other NAME matches a record whose client-visible
// name is NAME, or whose tool (the server's own name) is NAME.
type toolFilter struct {
	server, tool string // for the query
	name         string // matched by match; "" matches all
}

func parseToolFilter(arg string) toolFilter {
	if s, t, found := strings.Cut(arg, "/"); found {
		return toolFilter{server: s, tool: t}
	}
	return toolFilter{name: arg}
}

func (f toolFilter) match(r audit.Record) bool {
	return f.name == "" || r.Name == f.name || r.Tool == f.name
}

// itemName is the client-visible name of a definition of server.
func (g *guard) itemName(server, kind, key string) string {
	if gs := g.servers[server]; gs != nil {
		return itemName(server, gs.prefix, kind, key)
	}
	return server + "/" + key
}

// prefixes maps each server of the guard to its prefix.
func (g *guard) prefixes() map[string]string {
	out := make(map[string]string, len(g.servers))
	for name, gs := range g.servers {
		out[name] = gs.prefix
	}
	return out
}

// pendingChanges are the pending definition changes of what an admin
// named: a server (all of its changes), or one tool by its
// client-visible name.
func (g *guard) pendingChanges(name string) []integrity.Change {
	if _, ok := g.servers[name]; ok || name == "" {
		return g.pins.Pending(name)
	}
	server, tool, ok := resolveTool(name, g.prefixes())
	if !ok {
		return nil
	}
	var out []integrity.Change
	for _, ch := range g.pins.Pending(server) {
		if ch.Kind == integrity.KindTool && ch.Key == tool {
			out = append(out, ch)
		}
	}
	return out
}

// namedChanges is showChanges with each change's client-visible name.
func (g *guard) namedChanges(cs []integrity.Change) []pinChange {
	out := showChanges(cs)
	for i := range out {
		out[i].Name = g.itemName(out[i].Server, out[i].Kind, out[i].Key)
	}
	return out
}

// approvals lists the pending and remembered approvals, each with its
// tool's client-visible name.
func (g *guard) approvals() ([]approval.Request, []approval.Remembered) {
	pending, remembered := g.broker.Pending(), g.broker.Remembered()
	for i, p := range pending {
		if p.Name == "" {
			pending[i].Name = g.itemName(p.Server, integrity.KindTool, p.Tool)
		}
	}
	for i, m := range remembered {
		remembered[i].Name = g.itemName(m.Server, integrity.KindTool, m.Tool)
	}
	return pending, remembered
}
