package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A server can send notifications and garbage as fast as it can write.
// What the gateway does per message must then not multiply: list_changed
// notifications are coalesced per client, and the warnings a server can
// cause at will are rate-limited.

// listChangedEvery is the shortest time between two list_changed
// notifications of one kind to one client. The first after a quiet
// spell goes out at once; later ones are folded into one that goes out
// when the interval is over, so the last change is always announced.
const listChangedEvery = time.Second

// listKinds are the list_changed notifications, by bit.
var listKinds = [...]struct {
	kind, method string
}{
	{"tools", "notifications/tools/list_changed"},
	{"prompts", "notifications/prompts/list_changed"},
	{"resources", "notifications/resources/list_changed"},
}

// listNotes are one client's list_changed notifications waiting to be
// sent: at most one per kind. The zero value is ready to use.
type listNotes struct {
	mu      sync.Mutex
	pending uint8         // guarded by mu; a bit per listKinds entry
	kick    chan struct{} // guarded by mu; made on first use
}

// kicked returns the channel that wakes the sender when a kind turns pending.
func (l *listNotes) kicked() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kick == nil {
		l.kick = make(chan struct{}, 1)
	}
	return l.kick
}

// add marks kind pending; it never blocks.
func (l *listNotes) add(kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range listKinds {
		if k.kind == kind {
			l.pending |= 1 << i
		}
	}
	if l.kick == nil {
		l.kick = make(chan struct{}, 1)
	}
	select {
	case l.kick <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// take returns the pending kinds' methods and clears them.
func (l *listNotes) take() []string {
	l.mu.Lock()
	bits := l.pending
	l.pending = 0
	l.mu.Unlock()
	var out []string
	for i, k := range listKinds {
		if bits&(1<<i) != 0 {
			out = append(out, k.method)
		}
	}
	return out
}

// postListChanged tells the client that kind's list may differ, once
// however often it is called before the notification goes out.
func (d *downstream) postListChanged(kind string) {
	d.lists.add(kind)
}

// sendLists sends the pending list_changed notifications and reports
// whether there were any.
func (d *downstream) sendLists() bool {
	methods := d.lists.take()
	for _, method := range methods {
		d.notify(context.Background(), method, nil) // a list_changed carries nothing
	}
	return len(methods) > 0
}

// warnEvery and warnBurst limit one warning about one server's messages
// to warnBurst lines every warnEvery: a few garbage lines are all logged
// (each sample helps), a flood of them is not.
const (
	warnEvery = 10 * time.Second
	warnBurst = 10
)

// warnings rate-limits the warnings a server can cause at will (a flood
// of garbage, or of notifications a slow client cannot take); the first
// line after a suppressed spell says how many were suppressed. The zero
// value is ready to use.
type warnings struct {
	mu    sync.Mutex
	state map[string]*warnState // guarded by mu; by message
}

type warnState struct {
	since      time.Time // the start of the current window
	logged     int       // lines logged in it
	suppressed int       // lines suppressed since the last logged
}

// warn logs msg on log unless warnBurst lines of it were logged within
// the current window.
func (w *warnings) warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now()
	w.mu.Lock()
	if w.state == nil {
		w.state = map[string]*warnState{}
	}
	s := w.state[msg]
	if s == nil {
		s = &warnState{since: now}
		w.state[msg] = s
	}
	if now.Sub(s.since) >= warnEvery {
		s.since, s.logged = now, 0
	}
	if s.logged >= warnBurst {
		s.suppressed++
		w.mu.Unlock()
		return
	}
	s.logged++
	suppressed := s.suppressed
	s.suppressed = 0
	w.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	log.Warn(msg, args...)
}
