package dashboard

import (
	"context"
	"sync"

	"mcpbox/internal/audit"
)

// Event is one live update: an audit record committed (Type "record",
// with its Seq, Event and Server; never its contents), which tells a page
// what to reload.
type Event struct {
	Type   string `json:"type"`
	Seq    int64  `json:"seq,omitempty"`
	Event  string `json:"event,omitempty"`
	Server string `json:"server,omitempty"`
}

// subBuffer is how many events a slow subscriber may lag behind before
// the newest ones are dropped for it (its page reloads periodically too).
const subBuffer = 64

// Events fans live updates out to the dashboard's open pages. Safe for
// concurrent use; the zero value is not usable, call NewEvents.
type Events struct {
	mu   sync.Mutex
	subs map[chan Event]struct{} // guarded by mu
}

// NewEvents returns a publisher with no subscribers.
func NewEvents() *Events { return &Events{subs: map[chan Event]struct{}{}} }

// Publish sends ev to every subscriber without blocking: one that is
// full misses it.
func (e *Events) Publish(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// Subscribe returns a channel of events and the func that ends the
// subscription (and closes the channel).
func (e *Events) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, subBuffer)
	e.mu.Lock()
	e.subs[ch] = struct{}{}
	e.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			e.mu.Lock()
			delete(e.subs, ch)
			e.mu.Unlock()
			close(ch)
		})
	}
}

// AuditFollower is what FollowAudit reads: *audit.Store is one.
type AuditFollower interface {
	Follow(ctx context.Context, f audit.Filter, each func(audit.Record) error) error
}

// FollowAudit publishes to e every record committed to src with a Seq
// above after, until ctx ends, after passing it to each of observe in
// order (the metrics' Observe: synchronously, so that none misses a
// record). The caller reads after (the store's Head) before the gateway
// serves, so that no record falls between. It returns ctx's error, or
// the store's.
func FollowAudit(ctx context.Context, src AuditFollower, after int64, e *Events, observe ...func(audit.Record)) error {
	return src.Follow(ctx, audit.Filter{AfterSeq: after}, func(r audit.Record) error {
		for _, f := range observe {
			f(r)
		}
		e.Publish(Event{Type: "record", Seq: r.Seq, Event: r.Event, Server: r.Server})
		return nil
	})
}
