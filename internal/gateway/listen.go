package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A listen is an open subscriptions/listen stream of a 2026 client: the
// gateway's list_changed notifications for the session go out on it.
// The SDK answers the request (its acknowledgement names what the stream
// carries and its subscription id); the gateway only remembers where to
// send.
type listen struct {
	ss  *mcp.ServerSession
	ctx context.Context // the listen request's: routes onto its stream
	// Set from the acknowledgement; guarded by downstream.mu.
	subID                     any
	tools, prompts, resources bool
	uris                      map[string]bool // resources whose updates it carries
}

type listenKey struct{}

// serveListen registers a listen for as long as its request is open.
func (d *downstream) serveListen(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	l := &listen{ss: ss}
	ctx = context.WithValue(ctx, listenKey{}, l)
	l.ctx = ctx
	d.mu.Lock()
	if d.listens == nil {
		d.listens = map[*listen]struct{}{}
	}
	d.listens[l] = struct{}{}
	d.mu.Unlock()
	// Resource updates: subscribed at the resources' servers for as long
	// as some listen of the session wants them.
	var uris []string
	if p, ok := req.GetParams().(*mcp.SubscriptionsListenParams); ok && p != nil && p.Notifications != nil {
		uris = p.Notifications.ResourceSubscriptions
	}
	var mine []string
	for _, uri := range uris {
		if d.listenSubscribe(ctx, uri, true) {
			mine = append(mine, uri)
		}
	}
	defer func() {
		d.mu.Lock()
		delete(d.listens, l)
		d.mu.Unlock()
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, uri := range mine {
			d.listenSubscribe(uctx, uri, false)
		}
	}()
	return next(ctx, method, req)
}

// listenSubscribe counts the session's listens that want uri's updates,
// and subscribes at (or unsubscribes from) its server on the first (the
// last). It reports whether the subscription was taken.
func (d *downstream) listenSubscribe(ctx context.Context, uri string, on bool) bool {
	d.mu.Lock()
	if d.listenURIs == nil {
		d.listenURIs = map[string]int{}
	}
	n := d.listenURIs[uri]
	if on {
		d.listenURIs[uri] = n + 1
	} else if n <= 1 {
		delete(d.listenURIs, uri)
	} else {
		d.listenURIs[uri] = n - 1
	}
	d.mu.Unlock()
	if (on && n > 0) || (!on && n != 1) {
		return true
	}
	if _, err := d.subscribe(ctx, uri, on); err != nil {
		d.gw.log.Debug("resource subscription for a listen failed", "uri", uri, "agent", d.agent, "err", err)
		if on {
			d.mu.Lock()
			if d.listenURIs[uri]--; d.listenURIs[uri] <= 0 {
				delete(d.listenURIs, uri)
			}
			d.mu.Unlock()
		}
		return false
	}
	return true
}

// acknowledged notes what a listen carries, from the SDK's
// notifications/subscriptions/acknowledged on its way out.
func (d *downstream) acknowledged(ctx context.Context, req mcp.Request) {
	l, _ := ctx.Value(listenKey{}).(*listen)
	p, _ := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams)
	if l == nil || p == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l.subID = p.Meta[mcp.MetaKeySubscriptionID]
	l.tools, l.prompts, l.resources = p.Notifications.ToolsListChanged, p.Notifications.PromptsListChanged, p.Notifications.ResourcesListChanged
	l.uris = map[string]bool{}
	for _, uri := range p.Notifications.ResourceSubscriptions {
		l.uris[uri] = true
	}
}

// notifyListens sends a list_changed or resources/updated notification on
// every listen that asked for it, with the listen's subscription id in
// _meta.
func (d *downstream) notifyListens(method string, params json.RawMessage) {
	var uri string
	if method == "notifications/resources/updated" {
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(params, &p) != nil || p.URI == "" {
			return
		}
		uri = p.URI
	}
	d.mu.Lock()
	var to []*listen
	var ids []any
	for l := range d.listens {
		var want bool
		switch method {
		case "notifications/resources/updated":
			want = l.uris[uri]
		case "notifications/tools/list_changed":
			want = l.tools
		case "notifications/prompts/list_changed":
			want = l.prompts
		case "notifications/resources/list_changed":
			want = l.resources
		}
		if want {
			to = append(to, l)
			ids = append(ids, l.subID)
		}
	}
	d.mu.Unlock()
	for i, l := range to {
		raw, err := withMeta(params, map[string]any{mcp.MetaKeySubscriptionID: ids[i]})
		if err != nil {
			continue
		}
		ctx := context.WithValue(l.ctx, rawNoteKey{}, &rawNote{method: method, params: raw})
		if err := l.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{}); err != nil {
			d.gw.log.Debug("notification not delivered", "method", method, "agent", d.agent, "err", err)
		}
	}
}
