package cli

import (
	"strings"

	"mcpbox/internal/audit"
	"mcpbox/internal/guard"
	"mcpbox/internal/integrity"
)

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

// namedChanges is showChanges with each change's client-visible name.
func namedChanges(g *guard.Guard, cs []integrity.Change) []pinChange {
	out := showChanges(cs)
	for i := range out {
		out[i].Name = g.ItemName(out[i].Server, out[i].Kind, out[i].Key)
	}
	return out
}

// approvalsReply lists the pending and remembered approvals, each with
// its tool's client-visible name.
func approvalsReply(g *guard.Guard) adminReply {
	pending, remembered := g.Approvals()
	return adminReply{OK: true, Pending: pending, Remembered: remembered}
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
