package dashboard

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// keepAlive is how often an idle event stream sends a comment, so that
// proxies and the browser keep it open.
const keepAlive = 15 * time.Second

// apiEvents is the live stream (server-sent events): "record" when an
// audit record is committed, "approvals" when the pending approvals
// change. It ends with the session, the request or the handler's owner.
func (h *Handler) apiEvents(w http.ResponseWriter, r *http.Request) {
	cur := sessionOf(r)
	login := principal{cur.s.role, cur.s.who}
	h.mu.Lock()
	mine := h.streamsOf[login]
	if mine < maxStreamsEach {
		h.streamsOf[login]++
	}
	h.mu.Unlock()
	if mine >= maxStreamsEach {
		writeError(w, http.StatusServiceUnavailable, "too many open dashboard pages of this login")
		return
	}
	defer func() {
		h.mu.Lock()
		if h.streamsOf[login]--; h.streamsOf[login] == 0 {
			delete(h.streamsOf, login)
		}
		h.mu.Unlock()
	}()
	select {
	case h.streams <- struct{}{}:
		defer func() { <-h.streams }()
	default:
		writeError(w, http.StatusServiceUnavailable, "too many open dashboard pages")
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	id := cur.id
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": mcpbox\n\n")
	fl.Flush()
	var events <-chan Event
	if h.opts.Events != nil {
		ch, cancel := h.opts.Events.Subscribe()
		defer cancel()
		events = ch
	}
	poll := time.NewTicker(h.opts.ApprovalPoll)
	defer poll.Stop()
	alive := time.NewTicker(keepAlive)
	defer alive.Stop()
	last := h.pendingIDs()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			fmt.Fprintf(w, "event: record\ndata: {\"seq\":%d,\"event\":%q}\n\n", ev.Seq, ev.Event)
		case <-poll.C:
			if !h.alive(id) {
				return
			}
			if now := h.pendingIDs(); now != last {
				last = now
				fmt.Fprint(w, "event: approvals\ndata: {}\n\n")
				fl.Flush()
			}
			continue
		case <-alive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		}
		fl.Flush()
	}
}

// pendingIDs identifies the set of pending approvals.
func (h *Handler) pendingIDs() string {
	p, _ := h.opts.Backend.Approvals()
	ids := make([]string, len(p))
	for i, r := range p {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}
