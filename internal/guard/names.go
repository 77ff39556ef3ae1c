package guard

import (
	"strings"

	"mcpbox/internal/approval"
	"mcpbox/internal/config"
	"mcpbox/internal/integrity"
)

// A tool has one spelling wherever a human reads it: the name the client
// calls it by, its server's prefix followed by the server's own name
// ("github__create_issue"). Prompts carry the prefix too; templates,
// instructions and server info have no client-visible name and are shown
// as SERVER/KEY. Admin commands that take a tool accept that name as well
// as SERVER/TOOL.

// ItemName is how a definition (key, of an integrity kind: tool, prompt,
// template, ...) of server, whose prefix is prefix, is shown.
func ItemName(server, prefix, kind, key string) string {
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

// ItemName is the client-visible name of a definition of server.
func (g *Guard) ItemName(server, kind, key string) string {
	if gs := g.servers[server]; gs != nil {
		return ItemName(server, gs.prefix, kind, key)
	}
	return server + "/" + key
}

// prefixes maps each server of the guard to its prefix.
func (g *Guard) prefixes() map[string]string {
	out := make(map[string]string, len(g.servers))
	for name, gs := range g.servers {
		out[name] = gs.prefix
	}
	return out
}

// PendingChanges are the pending definition changes of what an admin
// named: a server (all of its changes), or one tool by its
// client-visible name; known false if name is neither (a typo must not
// read as "nothing pending").
func (g *Guard) PendingChanges(name string) (changes []integrity.Change, known bool) {
	if _, ok := g.servers[name]; ok || name == "" {
		return g.pins.Pending(name), true
	}
	server, tool, ok := resolveTool(name, g.prefixes())
	if !ok {
		return nil, false
	}
	var out []integrity.Change
	for _, ch := range g.pins.Pending(server) {
		if ch.Kind == integrity.KindTool && ch.Key == tool {
			out = append(out, ch)
		}
	}
	// A tool's name: one the server offers, or offered changed.
	return out, len(out) > 0 || g.KnownTool(server, tool)
}

// Approvals are the pending and remembered approvals, each with its
// tool's client-visible name.
func (g *Guard) Approvals() ([]approval.Request, []approval.Remembered) {
	pending, remembered := g.broker.Pending(), g.broker.Remembered()
	for i, p := range pending {
		if p.Name == "" {
			pending[i].Name = g.ItemName(p.Server, integrity.KindTool, p.Tool)
		}
	}
	for i, m := range remembered {
		remembered[i].Name = g.ItemName(m.Server, integrity.KindTool, m.Tool)
	}
	return pending, remembered
}
