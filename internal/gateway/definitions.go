package gateway

import (
	"context"
	"encoding/json"
	"fmt"
)

// Definitions is what one server lists, as the gateway receives it: the
// raw entries Hooks.List would see, and the server's serverInfo.
type Definitions struct {
	ServerInfo json.RawMessage
	// Lists holds the items of KindTools, KindPrompts and KindTemplates
	// that the server has (a kind it lacks the capability for is absent),
	// and always KindInstructions: its instructions, or an empty list.
	Lists map[string][]Item
}

// definitionsCaps are the client capabilities Definitions declares: every
// one a client may, so that a server that offers some tools only to
// clients that can sample, elicit or give roots lists them all, and the
// lock pins what any client may see (a server's requests for them get
// errors: no client is there to answer).
var definitionsCaps = json.RawMessage(`{"roots":{"listChanged":false},"sampling":{},"elicitation":{"form":{}}}`)

// Definitions starts server for scope outside any client session, lists
// its tools, prompts and resource templates, notes its instructions, and
// stops it again: what
// `mcpbox pin` records. The gateway's own tool filter (Allow, Deny)
// applies; Hooks.List does not.
func (g *Gateway) Definitions(ctx context.Context, server string, scope Scope) (*Definitions, error) {
	var srv *Server
	for _, s := range g.servers {
		if s.Name == server {
			srv = s
		}
	}
	if srv == nil {
		return nil, fmt.Errorf("no server %q", server)
	}
	u := newUpstream(g, srv, scope)
	defer u.stop()
	u.clientCaps = definitionsCaps
	if _, err := u.get(ctx); err != nil {
		return nil, err
	}
	info := u.info()
	d := &Definitions{ServerInfo: info.ServerInfo, Lists: map[string][]Item{KindInstructions: {}}}
	if info.Instructions != "" {
		d.Lists[KindInstructions] = []Item{InstructionsItem(info.Instructions)}
	}
	for _, kind := range []string{KindTools, KindPrompts, KindTemplates} {
		if !u.has(kind) {
			continue
		}
		items, err := u.list(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind, err)
		}
		if kind == KindTools {
			items = srv.filter(items)
		}
		d.Lists[kind] = items
	}
	return d, nil
}
