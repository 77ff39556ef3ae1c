package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamProtocol is the protocol version the gateway asks upstream
// servers for; they may answer with an older one.
const upstreamProtocol = "2025-11-25"

// startTimeout bounds launching a server and its initialize handshake
// (node servers in a fresh sandbox take a while on a loaded host) unless
// its Server.StartTimeout says otherwise. A variable for tests.
var startTimeout = 60 * time.Second

// sessionStartWait bounds how long a session's opening request waits for
// its servers once one runs (downstream.start): well under the 60 s the
// TypeScript SDK gives a request, and the 30 s of other clients, while a
// start itself has startTimeout. A server still starting then joins the
// session late. A variable for tests.
var sessionStartWait = 20 * time.Second

// hangMax is how many slow starts in a row (unanswered, errNoAnswer, or
// failed only after slowFail) may go by before the server is given up on
// for giveUpFor: every session of its scope waits for such a start, so
// after two such waits the next sessions go on without it at once,
// instead of after the crash loop's limit of fast ends. Two, not one: on
// a host so loaded that one start took that long, the next may not.
// After a give-up lapses, one more slow start gives up again: the count
// is reset only by a start that is answered or that fails fast.
const hangMax = 2

// slowFail is how long a failed start must have taken to count toward
// hangMax: a start that waits for something that does not come (a
// secret's named pipe nobody writes, a cmd: provider that waits for a
// login) fails only after its own timeout. A variable for tests.
var slowFail = 5 * time.Second

// errNoAnswer: a started server did not answer its opening request
// (initialize or server/discover) within startTimeout.
var errNoAnswer = errors.New("it did not answer initialize")

// Restart limits: a server that ends more than crashLoopMax times within
// crashWindow is given up on; between attempts the delay doubles from
// restartBase up to restartMax.
const (
	crashLoopMax = 5
	crashWindow  = 2 * time.Minute
	restartBase  = 250 * time.Millisecond
	restartMax   = 30 * time.Second
)

// giveUpFor is how long a crash loop's give-up holds: the first request
// after it starts the server afresh (its ends forgotten), since what broke
// it may be mended meanwhile (a full output dir emptied, a token renewed)
// without a serve restart. A server that still fails is given up on again
// after as many ends, so it starts at most crashLoopMax+1 times per
// giveUpFor, and only when requests ask for it. A variable for tests.
var giveUpFor = crashWindow

// upstream is one server for one scope: at most one running process (and
// its MCP session) at a time, restarted per Server.Restart.
type upstream struct {
	// Set by newUpstream, then only read.
	gw  *Gateway
	srv *Server
	// scope: whom it serves, and in which era: an instance of 2026-07-28
	// clients (Scope.Modern) is spoken to in that revision when the server
	// supports it (open).
	scope Scope
	log   *slog.Logger
	warns warnings // rate-limits warnings the server can cause at will; has its own lock
	// life ends when the upstream is stopped: background restarts and
	// refreshes run under it.
	life    context.Context
	endLife context.CancelFunc

	mu   sync.Mutex
	peer *peer    // guarded by mu
	proc *Process // guarded by mu
	// watched is closed once the end of peer has been accounted for
	// (restart policy); a get that finds peer ended waits for it.
	watched  chan struct{}            // guarded by mu
	starting chan struct{}            // non-nil while a start is under way; guarded by mu
	init     initInfo                 // guarded by mu
	lists    map[string]listed        // cached list results by kind; guarded by mu
	listGen  int                      // bumped when the server announces a change; guarded by mu
	sessions map[*downstream]struct{} // guarded by mu
	calls    []*inflight              // in flight, oldest first; guarded by mu
	held     int                      // calls in the call hook (a policy check, an approval wait): not idle; guarded by mu
	tokens   map[string]*inflight     // guarded by mu
	subs     map[string]int           // resource URI → downstream subscriptions; guarded by mu
	level    string                   // most recent logging/setLevel; guarded by mu
	// clientCaps are the capabilities of the first client attached, which
	// the server is told (roots, sampling, elicitation): a server may offer
	// tools only to clients that can serve them. Guarded by mu.
	clientCaps json.RawMessage
	crashes    []time.Time // guarded by mu
	hangs      int         // the last starts that were slow (see hangMax), in a row; guarded by mu
	failed     error       // restart is off, or the crash loop or hangMax limit hit; guarded by mu
	gaveUpAt   time.Time   // when either limit set failed (zero: neither did); guarded by mu
	// After an end the restart policy restarts (restart.go): when the new
	// process may start, what requests are told until then, the session
	// that ended last and how many restarts there have been. Guarded by mu.
	restartAt  time.Time
	restartErr *RestartError
	endedPeer  *peer
	restarts   int
	stopped    bool  // guarded by mu
	nextTok    int64 // guarded by mu
	stale      *peer // the running session, once Server.Refresh has passed; guarded by mu
	// Lifecycle (lifecycle.go): when the process started, when a request
	// last came, whether it is frozen, how many started, why the last
	// one stopped. Guarded by mu.
	startedAt time.Time
	used      time.Time
	called    time.Time // the last tools/call begun
	paused    bool
	starts    int
	reason    string

	// endListen ends the current subscriptions/listen stream (relisten);
	// listenSeq numbers them. Guarded by mu.
	endListen context.CancelFunc
	listenSeq int

	// listening is the session of the sessionless revision whose
	// subscriptions/listen the server acknowledged: its lists may be
	// cached, since their changes are announced. Guarded by mu.
	listening *peer

	// legacyOnly: a server that answered no server/discover; a modern
	// instance then uses the session-based handshake from the start.
	legacyOnly atomic.Bool
	// modernOnly: a server that refused initialize and answered
	// server/discover; a legacy instance then opens with discover from
	// the start, and its input_required results are translated for its
	// clients (mrtr2025.go).
	modernOnly atomic.Bool

	// freeze serializes Process.Pause and Process.Resume; it is never
	// taken with mu held.
	freeze sync.Mutex
}

// initInfo is what the upstream said in its initialize result.
type initInfo struct {
	Protocol     string          `json:"protocolVersion"`
	Capabilities json.RawMessage `json:"capabilities"`
	ServerInfo   json.RawMessage `json:"serverInfo"`
	Instructions string          `json:"instructions,omitempty"`
	caps         capabilities
}

// capabilities are the upstream capabilities the gateway routes by.
type capabilities struct {
	Tools     *struct{} `json:"tools"`
	Prompts   *struct{} `json:"prompts"`
	Resources *struct {
		Subscribe bool `json:"subscribe"`
	} `json:"resources"`
	Logging     *struct{} `json:"logging"`
	Completions *struct{} `json:"completions"`
}

// hold keeps the server from idling while a call to it is in the call
// hook, before it is forwarded (a human's approval may take minutes: the
// sandbox must not pause or stop under the call it is about to serve).
// The returned function ends the hold.
func (u *upstream) hold() func() {
	u.mu.Lock()
	u.held++
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		u.held--
		u.used = time.Now()
		u.mu.Unlock()
	}
}

// inflight is a request a downstream session forwarded and is waiting on.
// Notifications the upstream sends while it runs (progress, logging) are
// queued on events and sent by the waiting handler, on the request's own
// stream and before its response.
type inflight struct {
	d      *downstream
	p      *peer           // the session the request went to
	ctx    context.Context // the downstream handler's context
	token  any             // the client's progress token, nil if none
	gwTok  string          // the token the upstream sees
	events *events
	// noted: the gateway sent the client a progress note of its own on
	// this call (Call.Progress), so the server's notes are kept above
	// last, the progress last sent. noted is set before the request is
	// registered (begin); last is read and set on the peer's read loop.
	noted bool
	last  float64
}

// progressNote, in a call's context, records whether Call.Progress sent
// its note.
type progressNote struct{ sent atomic.Bool }

type progressNoteKey struct{}

func newUpstream(gw *Gateway, srv *Server, scope Scope) *upstream {
	life, end := context.WithCancel(context.Background())
	return &upstream{
		gw: gw, srv: srv, scope: scope, life: life, endLife: end,
		log:      gw.log.With("server", srv.Name, "agent", scope.Agent),
		lists:    map[string]listed{},
		sessions: map[*downstream]struct{}{},
		tokens:   map[string]*inflight{},
		subs:     map[string]int{},
	}
}

// errStopped is returned once the gateway stopped an upstream.
var errStopped = errors.New("server stopped")

// get returns a live session with the server, starting or restarting it
// as its restart policy allows.
func (u *upstream) get(ctx context.Context) (*peer, error) {
	for {
		u.mu.Lock()
		if u.stopped {
			u.mu.Unlock()
			return nil, errStopped
		}
		if u.peer != nil && u.peer != u.stale {
			select {
			case <-u.peer.done:
				watched := u.watched
				u.mu.Unlock()
				select {
				case <-watched:
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			default:
				p := u.peer
				u.used = time.Now()
				paused := u.paused
				u.mu.Unlock()
				if paused && u.resume() != nil {
					continue // it was stopped instead: start a new one
				}
				return p, nil
			}
		}
		if u.failed != nil {
			if !u.giveUpLapsedLocked() {
				err := u.failed
				u.mu.Unlock()
				return nil, err
			}
			u.log.Info("starting the server again: its crash loop's give-up has lapsed", "after", giveUpFor)
		}
		if wait := u.starting; wait != nil {
			u.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		delay := u.backoff()
		if u.stale != nil && u.stale == u.peer {
			delay = 0 // a refresh, not a crash
		}
		done := make(chan struct{})
		u.starting = done
		u.mu.Unlock()

		var err error
		if u.srv.Ready != nil {
			select {
			case <-u.srv.Ready(): // not in took: a setup's wait is no sign of a hung server
			case <-ctx.Done():
				err = fmt.Errorf("starting server %s: %w", u.srv.Name, ctx.Err())
			}
		}
		began := time.Now()
		if err == nil {
			err = u.start(ctx, delay)
		}
		took := time.Since(began) - max(delay, 0)

		u.mu.Lock()
		u.starting = nil
		var ev *RestartEvent
		if err != nil && !errors.Is(err, errStopped) && ctx.Err() == nil && !errors.Is(err, ErrNotSetUp) {
			// Not when the requester gave up: that is no fault of the
			// server; nor when it is not set up: nothing ran.
			if errors.Is(err, errNoAnswer) || took >= slowFail {
				u.hangs++
			} else {
				u.hangs = 0 // "in a row": another failure breaks the run
			}
			e := u.recordFailureLocked(fmt.Errorf("failed to start: %w", err), false)
			ev = &e
		}
		u.mu.Unlock()
		close(done)
		if ev != nil {
			u.announce(*ev)
		}
		if err != nil {
			return nil, err
		}
	}
}

// backoff is the delay before the next start: zero for the first one.
// Called with u.mu held.
func (u *upstream) backoff() time.Duration {
	n := len(u.crashes)
	if n == 0 {
		return 0
	}
	d := restartBase << (n - 1)
	if d > restartMax || d <= 0 {
		d = restartMax
	}
	return time.Until(u.crashes[n-1].Add(d))
}

// recordFailureLocked notes that the process ended (clean: by exiting
// with status 0) or could not start, and decides whether a later get may
// try again (decideLocked).
func (u *upstream) recordFailureLocked(err error, clean bool) RestartEvent {
	now := time.Now()
	u.crashes = slices.DeleteFunc(u.crashes, func(t time.Time) bool { return now.Sub(t) > crashWindow })
	u.crashes = append(u.crashes, now)
	ev := u.decideLocked(err, clean)
	if !ev.GaveUp {
		u.restarts++
	}
	return ev
}

// start launches the server, runs the initialize handshake and restores
// the log level and subscriptions an earlier process had.
func (u *upstream) start(parent context.Context, delay time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, u.startWait())
	defer cancel()
	return u.startWithin(ctx, parent, delay)
}

// startWait is how long a start may take: Server.StartTimeout, or
// startTimeout.
func (u *upstream) startWait() time.Duration {
	if u.srv.StartTimeout > 0 {
		return u.srv.StartTimeout
	}
	return u.gw.startTimeout
}

// startWithin is start under ctx, parent's with startWait: a relaunch
// shares that time, and an answer it misses counts as errNoAnswer too.
func (u *upstream) startWithin(ctx, parent context.Context, delay time.Duration) error {
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	proc, err := u.srv.Launch(ctx, u.scope)
	if err != nil {
		return fmt.Errorf("starting server %s: %w", u.srv.Name, err)
	}
	var c conn = proc.Conn
	if proc.Conn == nil {
		// Closing the connection closes the server's stdin only, which asks
		// it to exit; its stdout stays open until it has (Process.Stop), so
		// that a server writing while it shuts down does not die of EPIPE.
		c = newLineConn(proc.Stdout, proc.Stdin, proc.Stdin, "server "+u.srv.Name, u.srv.MaxMessage, u.dropped)
	}
	p := newPeer(c, u.onRequest, u.onNotify)
	info, relaunch, err := u.open(ctx, p, proc)
	if err != nil && !relaunch && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		err = fmt.Errorf("%w within %s", errNoAnswer, u.startWait())
	}
	if err != nil && !relaunch && ctx.Err() == nil && !answered(err) && endedWithin(p, time.Second) {
		// The server went away before it answered (it crashed at start):
		// "initialize: server connection ended: EOF" alone hides how, so
		// say it as watch does for a later end (its exit status, a kill).
		// A server that exits before it reads may fail the write first
		// (broken pipe) while its output's end is still on the way,
		// hence the wait.
		if d := proc.describe(); d != "" {
			err = fmt.Errorf("%s before it answered (%w)", d, err)
		}
	}
	if err != nil || relaunch {
		p.close()
		proc.stop()
		if relaunch {
			return u.startWithin(ctx, parent, 0)
		}
		return fmt.Errorf("server %s: %w", u.srv.Name, err)
	}
	u.mu.Lock()
	if u.stopped {
		u.mu.Unlock()
		p.close()
		proc.stop()
		return errStopped
	}
	restarted := u.init.Protocol != ""
	oldPeer, oldProc := u.peer, u.proc
	u.peer, u.proc, u.init = p, proc, info
	u.startedAt, u.used, u.paused = time.Now(), time.Now(), false
	u.starts++
	u.hangs = 0
	u.stale = nil
	watched := make(chan struct{})
	u.watched = watched
	p.accounted = watched
	u.lists = map[string]listed{}
	level, subs := u.level, make([]string, 0, len(u.subs))
	for uri := range u.subs {
		subs = append(subs, uri)
	}
	sessions := u.sessionsLocked()
	u.mu.Unlock()

	u.restore(ctx, p, info, level, subs)
	go u.watch(p, proc, watched)
	if oldPeer != nil {
		go u.retire(oldPeer, oldProc)
	}
	if d := u.srv.Refresh; d > 0 {
		time.AfterFunc(d, func() { u.refresh(p) })
	}
	if restarted {
		u.log.Info("server restarted")
		// Its lists may differ from the last process's.
		for _, d := range sessions {
			d.listChanged(u, info.caps)
		}
	}
	return nil
}

// open opens the session with a started server: server/discover for a
// 2026 client's instance, else (or when the server does not speak the
// new revision) initialize. A legacy instance of a server that refuses
// initialize but speaks the new revision is opened with discover too
// (modernOnly): an ordinary session-based server costs no extra round
// trip, since discover is tried only after initialize was refused.
// relaunch asks for a fresh process: a server that ended over the unknown
// request, or a connection of its own (a remote server's HTTP transport),
// which would carry one revision's version header into the other's
// opening request.
func (u *upstream) open(ctx context.Context, p *peer, proc *Process) (info initInfo, relaunch bool, err error) {
	if (u.scope.Modern || u.modernOnly.Load()) && !u.legacyOnly.Load() {
		info, err = u.discover(ctx, p)
		if err == nil || unreached(err) {
			return info, false, err
		}
		// Not a server of the new revision: the session-based one,
		// translated (mrtr.go).
		u.legacyOnly.Store(true)
		u.modernOnly.Store(false)
		u.log.Info("server does not speak 2026-07-28; using the session-based protocol", "err", err)
		if ended(p) || proc.Conn != nil {
			return initInfo{}, true, nil
		}
	}
	info, err = u.handshake(ctx, p)
	if err == nil {
		if proc.Negotiated != nil {
			proc.Negotiated(info.Protocol)
		}
		return info, false, nil
	}
	var werr *jsonrpc.Error
	if u.legacyOnly.Load() || !errors.As(err, &werr) || unreached(err) {
		return info, false, err
	}
	// The server answered initialize with an error: perhaps it speaks
	// only the sessionless revision. Ask it (legacyOnly bounds this to
	// one try: a server that refuses both is not asked again).
	u.log.Info("server refused initialize; trying server/discover (2026-07-28)", "err", err)
	u.modernOnly.Store(true)
	if ended(p) || proc.Conn != nil {
		return initInfo{}, true, nil
	}
	if info, derr := u.discover(ctx, p); derr == nil {
		return info, false, nil
	}
	u.modernOnly.Store(false)
	u.legacyOnly.Store(true)
	return initInfo{}, false, err
}

// codeRejected is the go-sdk's "rejected by transport" (its
// jsonrpc2.ErrRejected): a remote server's request that failed in the
// client's transport.
const codeRejected = -32005

// unreached reports whether err is a request that did not reach the
// server, rather than the server's refusal: no reason to try the other
// revision (and to start the server again twice, logging that it
// "refused initialize" when it was never reached).
// The go-sdk rejects an HTTP error status with the same code, so the
// *url.Error of http.Client.Do (DNS, dial, TLS, a timeout) is what tells
// "not reached" from a refusal (say, 400 for server/discover).
func unreached(err error) bool {
	var werr *jsonrpc.Error
	var uerr *url.Error
	return errors.As(err, &werr) && werr.Code == codeRejected && errors.As(err, &uerr)
}

// ended reports whether the session with the server is over.
func ended(p *peer) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// endedWithin reports whether p's connection ends within d.
func endedWithin(p *peer, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// answered reports whether err is the server's own JSON-RPC error: a
// server that answered is not gone.
func answered(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr)
}

// restore gives a restarted session-based server the session's log level
// and resource subscriptions again; a 2026 server gets its listen stream
// (the level goes with each request, and subscriptions are
// subscriptions/listen).
func (u *upstream) restore(ctx context.Context, p *peer, info initInfo, level string, subs []string) {
	if info.Protocol >= ModernVersion {
		u.relisten(p)
		return
	}
	if level != "" && info.caps.Logging != nil {
		_, _ = p.call(ctx, "logging/setLevel", map[string]string{"level": level})
	}
	for _, uri := range subs {
		_, _ = p.call(ctx, "resources/subscribe", map[string]string{"uri": uri})
	}
}

func (u *upstream) handshake(ctx context.Context, p *peer) (initInfo, error) {
	u.mu.Lock()
	caps := u.clientCaps
	u.mu.Unlock()
	if caps == nil {
		caps = json.RawMessage(`{}`)
	}
	params := map[string]any{
		"protocolVersion": upstreamProtocol,
		"capabilities":    caps,
		"clientInfo":      map[string]any{"name": "mcpbox", "version": u.gw.opts.Version},
	}
	raw, err := p.call(ctx, "initialize", params)
	if err != nil {
		return initInfo{}, fmt.Errorf("initialize: %w", err)
	}
	raw = u.gw.filter(u.srv.Name, raw) // instructions and serverInfo reach clients
	var info initInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return initInfo{}, fmt.Errorf("initialize: bad result: %w", err)
	}
	if len(info.Capabilities) > 0 {
		if err := json.Unmarshal(info.Capabilities, &info.caps); err != nil {
			return initInfo{}, fmt.Errorf("initialize: bad capabilities: %w", err)
		}
	}
	if err := p.notify(ctx, "notifications/initialized", nil); err != nil {
		return initInfo{}, err
	}
	return info, nil
}

// discover opens a session of the sessionless revision: server/discover
// with the gateway's _meta, which every later request then carries too
// (its client's own keys first). It fails for a server that does not
// support 2026-07-28.
func (u *upstream) discover(ctx context.Context, p *peer) (initInfo, error) {
	u.mu.Lock()
	caps := u.clientCaps
	u.mu.Unlock()
	if caps == nil {
		caps = json.RawMessage(`{}`)
	}
	meta := map[string]any{
		mcp.MetaKeyProtocolVersion:    ModernVersion,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "mcpbox", "version": u.gw.opts.Version},
		mcp.MetaKeyClientCapabilities: caps,
	}
	dctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	raw, err := p.call(dctx, "server/discover", map[string]any{"_meta": meta})
	if err != nil {
		return initInfo{}, fmt.Errorf("server/discover: %w", err)
	}
	raw = u.gw.filter(u.srv.Name, raw)
	var res struct {
		Versions     []string                   `json:"supportedVersions"`
		Capabilities json.RawMessage            `json:"capabilities"`
		Instructions string                     `json:"instructions"`
		Meta         map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return initInfo{}, fmt.Errorf("server/discover: bad result: %w", err)
	}
	if !slices.Contains(res.Versions, ModernVersion) {
		return initInfo{}, fmt.Errorf("server/discover: %s not among %v", ModernVersion, res.Versions)
	}
	info := initInfo{Protocol: ModernVersion, Capabilities: res.Capabilities, ServerInfo: res.Meta[mcp.MetaKeyServerInfo], Instructions: res.Instructions}
	if len(info.Capabilities) > 0 {
		if err := json.Unmarshal(info.Capabilities, &info.caps); err != nil {
			return initInfo{}, fmt.Errorf("server/discover: bad capabilities: %w", err)
		}
	}
	p.meta = meta
	return info, nil
}

// relisten (re)opens the subscriptions/listen stream to a server of the
// sessionless revision on session p: its list changes, and updates of the
// resources clients subscribed to (u.subs), reach onNotify like any
// server's notifications. A change of the subscribed resources replaces
// the stream. It lives as long as the session.
func (u *upstream) relisten(p *peer) {
	u.mu.Lock()
	c := u.init.caps
	uris := make([]string, 0, len(u.subs))
	for uri := range u.subs {
		uris = append(uris, uri)
	}
	slices.Sort(uris)
	if u.endListen != nil {
		// Until the new stream is acknowledged, changes may go unseen.
		u.endListen()
		u.listening = nil
		u.lists = map[string]listed{}
		u.listGen++
	}
	ctx, cancel := context.WithCancel(p.ctx)
	u.endListen = cancel
	u.listenSeq++
	seq := u.listenSeq
	u.mu.Unlock()
	want := map[string]any{
		"toolsListChanged":     c.Tools != nil,
		"promptsListChanged":   c.Prompts != nil,
		"resourcesListChanged": c.Resources != nil,
	}
	if len(uris) > 0 && c.Resources != nil && c.Resources.Subscribe {
		want["resourceSubscriptions"] = uris
	}
	if c.Tools == nil && c.Prompts == nil && c.Resources == nil {
		cancel()
		return
	}
	go func() {
		defer cancel()
		_, err := p.call(ctx, "subscriptions/listen", map[string]any{"notifications": want})
		u.mu.Lock()
		if u.listenSeq == seq && u.listening == p {
			// Changes go unannounced from now on: no cached list may stay.
			u.listening = nil
			u.lists = map[string]listed{}
			u.listGen++
		}
		u.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			u.log.Warn("subscriptions/listen ended; changes of this server go unannounced", "err", err)
		}
	}()
}

// discoverTimeout bounds server/discover: a server of the old revision
// may never answer a request before initialize (most answer at once with
// an error). Long enough for a slow start in a fresh sandbox, which
// should not be mistaken for the old revision.
var discoverTimeout = 15 * time.Second

// watch waits for the session to end and stops the process.
func (u *upstream) watch(p *peer, proc *Process, watched chan struct{}) {
	defer close(watched)
	err := p.wait()
	// Unless the gateway let go of the server first (a stop, a
	// restart), its side ended unasked: the end is its own. A stop that
	// raced this one has ended proc already (it ends once).
	u.mu.Lock()
	asked := u.peer != p || u.stopped
	u.mu.Unlock()
	if asked {
		proc.stop()
	} else {
		proc.gone()
	}
	u.mu.Lock()
	if u.peer != p || u.stopped {
		if u.peer == p {
			u.peer, u.proc = nil, nil
		}
		u.mu.Unlock()
		return
	}
	u.peer, u.proc = nil, nil
	if d := proc.describe(); d != "" {
		err = fmt.Errorf("%s", d)
	}
	u.log.Warn("server ended", "err", err)
	clean := proc.Clean != nil && proc.Clean()
	ev := u.recordFailureLocked(err, clean)
	u.endedPeer = p
	restart := !ev.GaveUp && len(u.sessions) > 0
	u.mu.Unlock()
	u.announce(ev)
	if restart {
		// Back at once (after the backoff), so that clients waiting for
		// notifications need not send a request first.
		go u.restartNow()
	}
}

// retireWait bounds how long a replaced process may finish its calls.
const retireWait = time.Minute

// refresh replaces session p with a new process now, unless p has
// already ended or been replaced.
func (u *upstream) refresh(p *peer) bool {
	u.mu.Lock()
	if u.peer != p || u.stopped {
		u.mu.Unlock()
		return false
	}
	u.stale = p
	u.mu.Unlock()
	u.log.Info("renewing the server's sandbox (secret ttl or rotation)")
	ctx, cancel := context.WithTimeout(u.life, u.startWait())
	defer cancel()
	if _, err := u.get(ctx); err != nil {
		u.log.Warn("renewal failed", "err", err)
		return false
	}
	return true
}

// retire ends a replaced session once no call is using it.
func (u *upstream) retire(p *peer, proc *Process) {
	deadline := time.Now().Add(retireWait)
	for time.Now().Before(deadline) {
		u.mu.Lock()
		busy := slices.ContainsFunc(u.calls, func(in *inflight) bool { return in.p == p })
		u.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	p.close()
	proc.stop()
}

// release calls Server.Release once the process is gone.
func (u *upstream) release() {
	if u.srv.Release != nil {
		u.srv.Release(u.scope)
	}
}

// stop ends the server for good. A start under way stops what it
// launched once it sees its context (u.life) end; stop returns the
// channel closed when it has, nil if there is none. Wait for it before
// the instance's release, so that no sandbox outlives the gateway.
func (u *upstream) stop() (started <-chan struct{}) {
	u.endLife()
	u.mu.Lock()
	u.stopped = true
	p, proc := u.peer, u.proc
	u.peer, u.proc = nil, nil
	if u.starting != nil {
		started = u.starting
	}
	u.mu.Unlock()
	if p != nil {
		p.close()
	}
	if proc != nil {
		proc.stop()
	}
	return started
}

// dropped records a message the server sent that was not forwarded.
func (u *upstream) dropped(reason string, sample []byte) {
	// Redacted whole, then cut: a cut first could split a value and leave
	// its first bytes unrecognised.
	sample = u.gw.filter(u.srv.Name, sample)
	if len(sample) > 120 {
		sample = sample[:120]
	}
	u.warns.warn(u.log, "dropped a message from the server", "reason", reason, "sample", string(sample))
}

func (u *upstream) attach(d *downstream, caps json.RawMessage) {
	u.mu.Lock()
	if u.clientCaps == nil {
		u.clientCaps = caps
	}
	u.sessions[d] = struct{}{}
	u.mu.Unlock()
}

// detach forgets d and its subscriptions; it reports whether no session
// is left.
func (u *upstream) detach(d *downstream, subs []string) bool {
	u.mu.Lock()
	delete(u.sessions, d)
	for _, uri := range subs {
		if u.subs[uri]--; u.subs[uri] <= 0 {
			delete(u.subs, uri)
		}
	}
	empty := len(u.sessions) == 0
	u.mu.Unlock()
	return empty
}

func (u *upstream) sessionsLocked() []*downstream {
	out := make([]*downstream, 0, len(u.sessions))
	for d := range u.sessions {
		out = append(out, d)
	}
	return out
}

func (u *upstream) info() initInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.init
}
