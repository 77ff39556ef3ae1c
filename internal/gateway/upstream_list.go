package gateway

import (
	"context"
	"encoding/json"
	"fmt"
)

// listSpec says how to list one kind of thing.
type listSpec struct{ method, field, key string }

var listSpecs = map[string]listSpec{
	"tools":     {"tools/list", "tools", "name"},
	"prompts":   {"prompts/list", "prompts", "name"},
	"resources": {"resources/list", "resources", "uri"},
	"templates": {"resources/templates/list", "resourceTemplates", "uriTemplate"},
}

// maxPages and listBytes bound one list the gateway follows and caches.
const (
	maxPages  = 100
	listBytes = 32 << 20
)

// listed is one list of a server as fetched: its items and the number
// (from Gateway.listSeq) that names them for Hooks.List.
type listed struct {
	items []Item
	gen   uint64
}

// list returns every item of kind (see listing).
func (u *upstream) list(ctx context.Context, kind string) ([]Item, error) {
	l, err := u.listing(ctx, kind)
	return l.items, err
}

// listing returns every item of kind, following pagination, from the
// cache when the server has not announced a change since, with the
// number that names that list.
func (u *upstream) listing(ctx context.Context, kind string) (listed, error) {
	if kind == "templates" {
		// Templates have no list_changed of their own: cache them with resources.
		u.mu.Lock()
		_, fresh := u.lists["resources"]
		if !fresh {
			delete(u.lists, "templates")
		}
		u.mu.Unlock()
	}
	u.mu.Lock()
	if l, ok := u.lists[kind]; ok {
		u.mu.Unlock()
		return l, nil
	}
	gen := u.listGen
	u.mu.Unlock()
	p, err := u.get(ctx)
	if err != nil {
		return listed{}, err
	}
	ctx, cancel := u.limit(ctx)
	defer cancel()
	spec := listSpecs[kind]
	var items []Item
	cursor := ""
	total := 0
	for range maxPages {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := p.call(ctx, spec.method, params)
		if err != nil {
			return listed{}, err
		}
		if total += len(raw); total > listBytes {
			return listed{}, fmt.Errorf("%s: the list is larger than %d bytes", spec.method, listBytes)
		}
		raw = u.gw.filter(u.srv.Name, raw)
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return listed{}, fmt.Errorf("%s: bad result: %w", spec.method, err)
		}
		var entries []json.RawMessage
		if err := json.Unmarshal(page[spec.field], &entries); err != nil && page[spec.field] != nil {
			return listed{}, fmt.Errorf("%s: bad %s: %w", spec.method, spec.field, err)
		}
		for _, e := range entries {
			var k map[string]json.RawMessage
			var key string
			if json.Unmarshal(e, &k) != nil || json.Unmarshal(k[spec.key], &key) != nil || key == "" {
				u.dropped(spec.method+": entry without "+spec.key, e)
				continue
			}
			items = append(items, Item{Key: key, Raw: e})
		}
		cursor = ""
		_ = json.Unmarshal(page["nextCursor"], &cursor)
		if cursor == "" {
			break
		}
	}
	l := listed{items: items, gen: u.gw.listSeq.Add(1)}
	u.mu.Lock()
	// Not if a change was announced meanwhile; for a server of the
	// sessionless revision, only while its subscriptions/listen stream,
	// which announces the changes, is open.
	if u.peer == p && u.listGen == gen && (u.init.Protocol < ModernVersion || u.listening == p) {
		u.lists[kind] = l
	}
	u.mu.Unlock()
	return l, nil
}

// setLevel forwards logging/setLevel and remembers it for restarts.
func (u *upstream) setLevel(ctx context.Context, level string) {
	u.mu.Lock()
	u.level = level
	u.mu.Unlock()
	if info := u.info(); info.caps.Logging == nil || info.Protocol >= ModernVersion {
		// The sessionless revision has no logging/setLevel: the level goes
		// with each request (downstream.call).
		return
	}
	if p, err := u.get(ctx); err == nil {
		ctx, cancel := u.limit(ctx)
		defer cancel()
		_, _ = p.call(ctx, "logging/setLevel", map[string]string{"level": level})
	}
}

// limit bounds one request of the gateway's own to the server's call
// timeout, so that a server that never answers cannot hold it forever.
func (u *upstream) limit(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, u.gw.callTimeout(u.srv), ErrCallTimeout)
}

// subscribe counts a downstream subscription and forwards the first one.
func (u *upstream) subscribe(ctx context.Context, uri string, on bool) error {
	u.mu.Lock()
	n := u.subs[uri]
	if on {
		u.subs[uri] = n + 1
	} else if n > 0 {
		if u.subs[uri] = n - 1; n == 1 {
			delete(u.subs, uri)
		}
	}
	u.mu.Unlock()
	if (on && n > 0) || (!on && n != 1) {
		return nil
	}
	p, err := u.get(ctx)
	if err != nil {
		return err
	}
	if u.info().Protocol >= ModernVersion {
		// No resources/subscribe in the sessionless revision: the
		// resources go on the server's listen stream.
		u.relisten(p)
		return nil
	}
	ctx, cancel := u.limit(ctx)
	defer cancel()
	method := "resources/subscribe"
	if !on {
		method = "resources/unsubscribe"
	}
	_, err = p.call(ctx, method, map[string]string{"uri": uri})
	return err
}
