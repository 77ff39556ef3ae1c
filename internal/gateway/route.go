package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// list answers tools/list, prompts/list, resources/list and
// resources/templates/list with the servers' items in config order, names
// prefixed, hidden tools left out, in pages of Options.PageSize.
func (d *downstream) list(ctx context.Context, kind, cursor string) (mcp.Result, error) {
	start := 0
	if cursor != "" {
		n, err := decodeCursor(cursor)
		if err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "invalid cursor")
		}
		start = n
	}
	d.mu.Lock()
	bs := d.bound
	d.mu.Unlock()
	var all []json.RawMessage
	for _, b := range bs {
		if !b.ok() || !b.has(kind) {
			continue
		}
		l, err := b.u.listing(ctx, kind)
		items := l.items
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// One broken server does not hide the others.
			d.gw.log.Warn("listing failed", "server", b.srv.Name, "kind", kind, "err", err)
			continue
		}
		if kind == KindTools {
			items = b.srv.filter(items)
		}
		vis := d.visible(b.srv, kind, l.gen, items)
		if modernOf(ctx) != nil {
			// Deterministic for 2026 clients, whatever order a server
			// lists in: servers in configuration order, each one's items
			// by name (URI), so that pages and cached lists agree.
			vis = slices.Clone(vis)
			slices.SortStableFunc(vis, func(a, b Item) int { return strings.Compare(a.Key, b.Key) })
		}
		for _, it := range vis {
			raw := it.Raw
			if kind == KindTools {
				if raw = d.gw.clientTool(b.srv.Name, it); raw == nil {
					continue
				}
			}
			if b.srv.Prefix != "" && (kind == "tools" || kind == "prompts") {
				var err error
				if raw, err = setField(raw, "name", b.srv.Prefix+it.Key); err != nil {
					continue
				}
			}
			all = append(all, raw)
		}
	}
	if start > len(all) {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "invalid cursor")
	}
	end := min(start+d.gw.opts.PageSize, len(all))
	field := listSpecs[kind].field
	page := map[string]any{field: all[start:end]}
	if all == nil {
		page[field] = []json.RawMessage{}
	}
	if end < len(all) {
		page["nextCursor"] = encodeCursor(end)
	}
	raw, err := json.Marshal(page)
	if err != nil {
		return nil, err
	}
	return d.result(raw), nil
}

// visible passes a server's items, of its list gen, through Hooks.List
// for this session's agent.
func (d *downstream) visible(srv *Server, kind string, gen uint64, items []Item) []Item {
	if h := d.gw.opts.Hooks.List; h != nil && len(items) > 0 {
		return h(d.agent, srv.Name, kind, gen, items)
	}
	return items
}

// lookup returns the entry key of kind in b's current list, if this
// session may see it. Without a List hook it asks nothing and reports
// found with an empty Item: the server decides what exists.
func (d *downstream) lookup(ctx context.Context, b *bound, kind, key string) (Item, bool, error) {
	if d.gw.opts.Hooks.List == nil {
		return Item{}, true, nil
	}
	l, err := b.u.listing(ctx, kind)
	if err != nil {
		return Item{}, false, err
	}
	items := l.items
	if kind == KindTools {
		items = b.srv.filter(items)
	}
	// The whole list, as a list request passes it: the hook may decide an
	// item by the others (and may remember its answer for this list).
	for _, it := range d.visible(b.srv, kind, l.gen, items) {
		if it.Key == key {
			return it, true, nil
		}
	}
	return Item{}, false, nil
}

func (b *bound) has(kind string) bool { return b.u.has(kind) }

// has reports whether the server offers kind's list.
func (u *upstream) has(kind string) bool {
	c := u.info().caps
	switch kind {
	case "tools":
		return c.Tools != nil
	case "prompts":
		return c.Prompts != nil
	}
	return c.Resources != nil
}

func encodeCursor(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("mcpbox:" + strconv.Itoa(n)))
}

func decodeCursor(s string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), "mcpbox:"))
	if err != nil || n < 0 || !strings.HasPrefix(string(b), "mcpbox:") {
		return 0, strconv.ErrSyntax
	}
	return n, nil
}

// resourceServer finds the server of a resource URI: the one that listed
// it, else the one whose template matches, else the only server with
// resources.
func (d *downstream) resourceServer(ctx context.Context, uri string) (*bound, error) {
	d.mu.Lock()
	bs := d.bound
	d.mu.Unlock()
	var withResources []*bound
	for _, b := range bs {
		if b.ok() && b.has("resources") {
			withResources = append(withResources, b)
		}
	}
	if len(withResources) == 1 {
		return withResources[0], nil
	}
	for _, b := range withResources {
		items, _ := b.u.list(ctx, "resources")
		for _, it := range items {
			if it.Key == uri {
				return b, nil
			}
		}
	}
	for _, b := range withResources {
		l, _ := b.u.listing(ctx, "templates")
		for _, it := range d.visible(b.srv, KindTemplates, l.gen, l.items) {
			if t, err := uritemplate.New(it.Key); err == nil && t.Match(uri) != nil {
				return b, nil
			}
		}
	}
	return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown resource %q", echoName(uri))
}

// subscribe records which server a URI was subscribed on: updates are
// routed by that server and URI, never by the URI alone, since two
// servers (a shared one and a private one) may offer the same URI.
func (d *downstream) subscribe(ctx context.Context, uri string, on bool) (mcp.Result, error) {
	var b *bound
	if on {
		var err error
		if b, err = d.resourceServer(ctx, uri); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	u, had := d.subs[uri]
	switch {
	case on && !had:
		d.subs[uri] = b.u
	case !on && had:
		// On the server it was subscribed on, whatever the URI resolves to now.
		delete(d.subs, uri)
		for _, o := range d.bound {
			if o.u == u {
				b = o
			}
		}
	}
	d.mu.Unlock()
	if on != had && b != nil {
		if err := b.u.subscribe(ctx, uri, on); err != nil {
			return nil, d.clientError(b, err)
		}
	}
	return d.result(json.RawMessage("{}")), nil
}

// subscribed reports whether the client subscribed to uri on u.
func (d *downstream) subscribed(u *upstream, uri string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.subs[uri] == u
}

func (d *downstream) complete(ctx context.Context, method string, p *mcp.CompleteParams) (mcp.Result, error) {
	if p.Ref == nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "missing ref")
	}
	var b *bound
	ref := map[string]any{"type": p.Ref.Type}
	switch p.Ref.Type {
	case "ref/prompt":
		var name string
		var ok bool
		b, name, ok = d.route(p.Ref.Name, func(b *bound) bool { return b.ok() && b.has("prompts") })
		if !ok {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown prompt %q", echoName(p.Ref.Name))
		}
		// A prompt the client may not see (pinning, policy) completes nothing.
		if _, visible, err := d.lookup(ctx, b, KindPrompts, name); err != nil {
			return nil, d.clientError(b, err)
		} else if !visible {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown prompt %q", echoName(p.Ref.Name))
		}
		ref["name"] = name
	case "ref/resource":
		var err error
		if b, err = d.resourceServer(ctx, p.Ref.URI); err != nil {
			return nil, err
		}
		ref["uri"] = p.Ref.URI
	default:
		return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown ref type %q", echoName(p.Ref.Type))
	}
	if b.u.info().caps.Completions == nil {
		return d.result(json.RawMessage(`{"completion":{"values":[]}}`)), nil
	}
	return d.forward(ctx, b, method, withField(p, "ref", ref))
}

// toolCallParams is withField(p, "name", tool) without its JSON round
// trip, for the common call that carries nothing but a name and
// arguments (no _meta, no input responses or request state): the
// arguments stay the client's JSON text, as withField keeps them. Any
// other call takes withField. TestToolCallParamsMatchesWithField holds
// the two to the same output.
func toolCallParams(p *mcp.CallToolParamsRaw, tool string) map[string]any {
	if len(p.Meta) > 0 || len(p.InputResponses) > 0 || p.RequestState != "" {
		return withField(p, "name", tool)
	}
	m := make(map[string]any, 2)
	m["name"] = tool
	if len(p.Arguments) > 0 {
		m["arguments"] = p.Arguments
	}
	return m
}

// withField returns params as a JSON object with fields replaced
// (name, value pairs). Every other field stays the JSON text it was
// (a json.RawMessage): a call's arguments reach the server byte for byte
// (but for insignificant whitespace), never re-encoded through float64,
// which would turn 9007199254740993 into 9007199254740992 after the
// approver and the policy saw the first. _meta is decoded (numbers as
// json.Number) because the gateway replaces its progress token.
func withField(params any, kv ...any) map[string]any {
	raw, _ := json.Marshal(params)
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		fields = nil
	}
	m := make(map[string]any, len(fields)+len(kv)/2)
	for k, v := range fields {
		m[k] = v
	}
	if v, ok := fields["_meta"]; ok {
		var meta map[string]any
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if dec.Decode(&meta) == nil && meta != nil {
			m["_meta"] = mcp.Meta(meta)
		}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// setField replaces one field of a raw JSON object, keeping every other
// field as it was.
func setField(raw json.RawMessage, field string, value any) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	m[field] = v
	return json.Marshal(m)
}
