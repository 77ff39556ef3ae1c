package cli

import (
	"strings"

	"mcpbox/internal/audit"
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

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
