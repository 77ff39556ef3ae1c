package approval

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scopes of a decision.
const (
	ScopeOnce    = "once"    // this request only
	ScopeSession = "session" // this client session, server and tool, until EndSession or Revoke
	ScopeAlways  = "always"  // this client, server and tool, persisted until Revoke
)

// Kinds of request.
const (
	KindCall  = "call"  // a tool call
	KindTrust = "trust" // a changed tool definition to trust
)

// DefaultTimeout is how long Ask waits for a human when Options.Timeout is
// 0: below the 60 s after which common MCP clients give up on a request.
const DefaultTimeout = 50 * time.Second

// MaxSummary is the longest Request.Summary kept, in characters; Ask cuts
// longer ones.
const MaxSummary = 500

// elicitChoices are offered to the calling client. "always" is not: only
// the CLI and the web endpoint, which the gateway's operator controls, can
// persist a decision.
var elicitChoices = []string{ScopeOnce, ScopeSession, "deny"}

// Request is one call (or tool definition) held for a human.
type Request struct {
	ID      string    `json:"id"`   // "apr_" + 12 random base32 characters, assigned by Ask
	Time    time.Time `json:"time"` // assigned by Ask
	Kind    string    `json:"kind"` // KindCall or KindTrust; "" means KindCall
	Client  string    `json:"client"`
	Session string    `json:"session"`
	Server  string    `json:"server"`
	Tool    string    `json:"tool"`
	Name    string    `json:"name,omitempty"` // the tool as the client calls it (with the server's prefix); "" for SERVER.TOOL
	Sandbox string    `json:"sandbox"`
	Rule    string    `json:"rule"`    // the policy rule that asked for review
	Summary string    `json:"summary"` // redacted argument summary by the caller (see Summary); cut to MaxSummary
	// Arguments are the call's whole arguments, redacted by the caller,
	// as JSON (compacted; text that is not JSON becomes a JSON string);
	// at most MaxArguments bytes. Every channel shows all of them (see
	// Show); nil for a trust request.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Conditional reports that Rule has a when: condition, which a
	// decision for the session or always passes over: it covers every
	// later call of the tool, whatever its arguments.
	Conditional bool `json:"conditional,omitempty"`
	// Where, in a listing of another instance's requests (a dashboard's),
	// names the instance that holds it: "PROJECT (pid N)". Not stored.
	Where string `json:"where,omitempty"`
}

// Decision answers a Request.
type Decision struct {
	Allow  bool   `json:"allow"`
	Scope  string `json:"scope"` // ScopeOnce, ScopeSession or ScopeAlways; "" means once; a deny is always once
	By     string `json:"by"`    // who: "cli:uid=1000", "elicitation:CLIENT", "web", "timeout", "remembered:ID", ByCancelled, ByNoChannel
	Reason string `json:"reason,omitempty"`
	// Via is the channel another instance took the decision in before
	// passing it on ("web": its dashboard's), which this instance's
	// approvals.channels must allow too; "" for a decision made here.
	Via string `json:"-"`
}

// ByCancelled decides a request whose call was cancelled (its context
// ended: the client cancelled it or ended its session, the gateway shut
// down) or whose broker closed: a deny, stored as status "cancelled" with
// the reason.
const ByCancelled = "cancelled"

// ByNoChannel denies at once a request that no channel can put to a
// person (Options.ElicitationOnly, and no Elicitor).
const ByNoChannel = "no-channel"

// Elicitor asks the calling client to choose one of choices (see Ask).
// An empty choice or an error means no answer from this channel; the
// others still count. A choice that is not one of choices denies.
type Elicitor func(ctx context.Context, message string, choices []string) (choice string, err error)

// Options configure a Broker.
type Options struct {
	// DB holds the approval tables; required. The broker creates them if
	// missing and never closes DB.
	DB *sql.DB
	// Timeout is how long Ask waits for a decision before it denies. If
	// zero, DefaultTimeout.
	Timeout time.Duration
	// OnDecision, if non-nil, is called exactly once for every decided
	// request (including remembered answers, timeouts and cancellations),
	// before Ask returns. It is the audit hook and must not block long.
	OnDecision func(Request, Decision)
	// Waiting, if non-nil, is called once a request starts waiting for a
	// human (not for one a remembered decision answers), with its ID
	// set, before Ask blocks, with Ask's ctx; elicited says whether the
	// calling client is asked too. It tells the operator how to decide it
	// (and a client not asked that it waits); the timeout runs meanwhile.
	Waiting func(ctx context.Context, req Request, elicited bool)
	// Now, if non-nil, stamps requests and decisions; nil means time.Now.
	// Timeouts always run on the real clock.
	Now func() time.Time
	// Shared: other brokers use DB at the same time (other gateways on
	// one state dir), so the requests left pending in it may be theirs and
	// are not expired at New. False: they were left by a process that
	// ended, and are marked expired.
	Shared bool
	// ElicitationOnly: the calling client's elicitation is the only
	// channel (no CLI, no web), so nobody else can decide. A request
	// without an Elicitor is denied at once (By ByNoChannel), and one
	// whose client dismisses the question or fails to answer is denied
	// then (By "elicitation:CLIENT"), rather than at the timeout.
	ElicitationOnly bool
}

// Remembered is a decision that answers later requests without a human.
type Remembered struct {
	ID      string    `json:"id"` // the ID of the request whose decision this is
	Client  string    `json:"client"`
	Session string    `json:"session,omitempty"` // set for ScopeSession only
	Server  string    `json:"server"`
	Tool    string    `json:"tool"`
	Name    string    `json:"name,omitempty"` // as in Request; set by the broker's user
	Scope   string    `json:"scope"`
	By      string    `json:"by"`
	Time    time.Time `json:"time"`
}

// Broker holds calls that need human review until someone decides. It is
// safe for concurrent use.
type Broker struct {
	store      *store
	timeout    time.Duration
	onDecision func(Request, Decision)
	waiting    func(context.Context, Request, bool)
	now        func() time.Time
	// elicitOnly is Options.ElicitationOnly.
	elicitOnly bool

	mu       sync.Mutex
	pending  map[string]*waiter        // guarded by mu
	settling map[string]*waiter        // taken out of pending, decision being recorded; guarded by mu
	sessions map[sessionKey]Remembered // guarded by mu
	closed   bool                      // guarded by mu
}

type sessionKey struct{ client, session, server, tool string }

// waiter is one held request. done is closed once decision and err are set
// by the single settle that removed it from Broker.pending.
type waiter struct {
	req      Request
	done     chan struct{}
	decision Decision
	err      error
}

// New returns a broker over opts.DB. Requests that an earlier process left
// pending are marked expired: their calls are gone. Two live brokers must
// not share one database, or each would expire the other's requests.
func New(opts Options) (*Broker, error) {
	if opts.DB == nil {
		return nil, ErrNoDB
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("approval timeout %v is negative", opts.Timeout)
	}
	b := &Broker{
		timeout:    cmp.Or(opts.Timeout, DefaultTimeout),
		onDecision: opts.OnDecision,
		waiting:    opts.Waiting,
		now:        opts.Now,
		elicitOnly: opts.ElicitationOnly,
		pending:    map[string]*waiter{},
		settling:   map[string]*waiter{},
		sessions:   map[sessionKey]Remembered{},
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.onDecision == nil {
		b.onDecision = func(Request, Decision) {}
	}
	s, err := openStore(context.Background(), opts.DB, b.now(), opts.Shared)
	if err != nil {
		return nil, err
	}
	b.store = s
	return b, nil
}

// Ask holds a call until it is decided and returns the decision.
//
// A remembered allow answers at once: ScopeSession for the same client,
// session, server and tool; ScopeAlways for the same client, server and
// tool. Only KindCall requests use or make remembered decisions; a changed
// tool definition is reviewed every time. Otherwise the request is stored
// as pending, elicit (if non-nil) is asked concurrently with the choices
// "once", "session" and "deny", and Decide (the CLI, the web endpoint) may
// answer; the first decision wins. After Options.Timeout a call is denied
// (By "timeout"; a trust request has no timeout: nothing waits on it);
// when ctx is done or the broker closes, it is denied (By "cancelled"). A session or always scoped allow is remembered; a deny
// never outlives its request.
//
// Ask cleans control characters out of req's text fields, cuts Summary
// to MaxSummary characters and compacts Arguments (refusing more than
// MaxArguments bytes with ErrArgumentsTooLarge). A non-nil error (the request is malformed or
// could not be stored) comes with a deny: callers must fail closed.
func (b *Broker) Ask(ctx context.Context, req Request, elicit Elicitor) (Decision, error) {
	req, err := b.prepare(req)
	if err != nil {
		return Decision{Scope: ScopeOnce, Reason: "invalid approval request"}, err
	}
	if b.isClosed() {
		d := Decision{Scope: ScopeOnce, By: ByCancelled, Reason: "approval broker closed"}
		b.onDecision(req, d)
		return d, nil
	}
	if d, ok, err := b.recall(req); err != nil || ok {
		if err != nil {
			return Decision{Scope: ScopeOnce, Reason: "reading remembered approvals failed"}, err
		}
		b.onDecision(req, d)
		return d, nil
	}
	if b.elicitOnly && elicit == nil {
		d := Decision{Scope: ScopeOnce, By: ByNoChannel,
			Reason: "no approval channel reaches a person: the client cannot be asked (no elicitation), and approvals.channels has neither cli nor web"}
		b.onDecision(req, d)
		return d, nil
	}
	if err := b.store.insertPending(context.Background(), req); err != nil {
		return Decision{Scope: ScopeOnce, Reason: "recording the approval request failed"}, err
	}
	w := &waiter{req: req, done: make(chan struct{})}
	if !b.hold(w) {
		b.finish(w, Decision{Scope: ScopeOnce, By: ByCancelled, Reason: "approval broker closed"})
		return w.decision, w.err
	}
	// The timeout runs from here: a client slow to take Waiting's note
	// does not lengthen it.
	var expired <-chan time.Time
	if w.req.Kind == KindCall {
		timer := time.NewTimer(b.timeout)
		defer timer.Stop()
		expired = timer.C
	}
	if b.waiting != nil {
		b.waiting(ctx, w.req, elicit != nil)
	}
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	if elicit != nil {
		go b.elicit(ectx, w, elicit)
	}
	return b.wait(ctx, w, expired)
}

// prepare checks req and fills in ID and Time.
func (b *Broker) prepare(req Request) (Request, error) {
	req.Kind = cmp.Or(req.Kind, KindCall)
	if req.Kind != KindCall && req.Kind != KindTrust {
		return req, fmt.Errorf("asking approval of kind %q: %w", req.Kind, ErrBadKind)
	}
	for _, f := range []*string{&req.Client, &req.Session, &req.Server, &req.Tool, &req.Sandbox, &req.Rule, &req.Summary} {
		*f = clean(*f)
	}
	req.Summary = cut(req.Summary, MaxSummary)
	args, err := prepareArguments(req.Arguments)
	if err != nil {
		return req, err
	}
	req.Arguments = args
	id, err := newID()
	if err != nil {
		return req, err
	}
	req.ID, req.Time = id, b.now()
	return req, nil
}

// recall answers req from a remembered decision, if one applies.
func (b *Broker) recall(req Request) (Decision, bool, error) {
	if req.Kind != KindCall {
		return Decision{}, false, nil
	}
	var m Remembered
	var ok bool
	if req.Session != "" {
		b.mu.Lock()
		m, ok = b.sessions[sessionKey{req.Client, req.Session, req.Server, req.Tool}]
		b.mu.Unlock()
	}
	if !ok {
		var err error
		if m, ok, err = b.store.lookup(context.Background(), req.Client, req.Server, req.Tool); err != nil || !ok {
			return Decision{}, false, err
		}
	}
	return Decision{Allow: true, Scope: m.Scope, By: "remembered:" + m.ID}, true, nil
}

func (b *Broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// hold registers w as pending; false if the broker is closed.
func (b *Broker) hold(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.pending[w.req.ID] = w
	return true
}

// wait blocks until w is decided, deciding it on timeout (expired: a
// call's only, no caller waits on a trust request) or cancellation.
func (b *Broker) wait(ctx context.Context, w *waiter, expired <-chan time.Time) (Decision, error) {
	select {
	case <-w.done:
	case <-expired:
		b.settle(w.req.ID, Decision{Scope: ScopeOnce, By: "timeout", Reason: fmt.Sprintf("no decision within %v", b.timeout)})
	case <-ctx.Done():
		b.settle(w.req.ID, Decision{Scope: ScopeOnce, By: ByCancelled, Reason: cancelReason(ctx)})
	}
	// If settle lost the race, the winner is finishing; its decision counts.
	<-w.done
	return w.decision, w.err
}

// cancelReason says why ctx ended: a bare cancel is the client's
// (notifications/cancelled); a cause names the session's end, a shutdown.
func cancelReason(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, context.DeadlineExceeded):
		return "the call timed out"
	case cause == nil, cause == context.Canceled:
		return "the client cancelled the request"
	default:
		return cause.Error()
	}
}

// elicit asks the calling client and settles w with its answer, if any.
func (b *Broker) elicit(ctx context.Context, w *waiter, elicit Elicitor) {
	choice, err := elicit(ctx, b.Message(w.req), slices.Clone(elicitChoices))
	by := "elicitation:" + w.req.Client
	switch {
	case err == nil && (choice == ScopeOnce || choice == ScopeSession):
		b.settle(w.req.ID, Decision{Allow: true, Scope: choice, By: by})
	case err == nil && choice == "deny":
		b.settle(w.req.ID, Decision{Scope: ScopeOnce, By: by})
	case err == nil && choice != "":
		// An answer, but not to this question ("always", which was not
		// offered, or garbage): the person acted, so waiting for another
		// channel would leave them without word until the timeout.
		b.settle(w.req.ID, Decision{Scope: ScopeOnce, By: by, Reason: fmt.Sprintf(
			"the client answered %q, which is not one of %s", cut(clean(choice), 40), strings.Join(elicitChoices, ", "))})
	case b.elicitOnly && ctx.Err() == nil:
		// No answer (dismissed or failed), and nobody else can give one.
		b.settle(w.req.ID, Decision{Scope: ScopeOnce, By: by, Reason: NoAnswer})
	}
}

// NoAnswer is the Reason of a request denied because the calling client,
// the only channel, gave no answer (Options.ElicitationOnly).
const NoAnswer = "the client gave no answer, and no other approval channel is on"

// Decide answers the pending request id. It returns ErrUnknown if there is
// no such request, ErrCancelled if its call was cancelled (its client gave
// up, its session ended), ErrDecided if it was decided or expired already,
// ErrElsewhere if another broker on the same database holds it,
// and the storage error if the decision could not be recorded (the call is
// then denied).
func (b *Broker) Decide(id string, d Decision) error {
	if id == "" {
		return fmt.Errorf("deciding: no request ID given (mcpbox approvals lists them): %w", ErrUnknown)
	}
	d, err := normalize(d)
	if err != nil {
		return err
	}
	if err := b.settle(id, d); !errors.Is(err, ErrUnknown) {
		return err
	}
	// Being decided right now (its call cancelled, a timeout, another
	// channel): once that is recorded, the store says which.
	b.mu.Lock()
	w := b.settling[id]
	b.mu.Unlock()
	if w != nil {
		<-w.done
	}
	st, by, reason, err := b.store.status(context.Background(), id)
	switch {
	case err != nil:
		return err
	case st == "":
		return fmt.Errorf("deciding %s: %w", id, ErrUnknown)
	case st == statusCancelled:
		// Its call is gone: an allow now would run it for nobody.
		return fmt.Errorf("request %s was cancelled (%s); nothing is left to decide: %w", id, reason, ErrCancelled)
	case st == statusPending:
		// Stored as pending, held by no one here: another gateway on
		// this state dir holds it.
		return fmt.Errorf("deciding %s: it waits at another instance of this state dir (mcpbox approve reaches every one): %w", id, ErrElsewhere)
	case by == "timeout":
		return fmt.Errorf("request %s timed out (%s) and its call was denied; nothing is left to decide: %w", id, reason, ErrDecided)
	case st == statusExpired:
		return fmt.Errorf("request %s expired (%s); nothing is left to decide: %w", id, reason, ErrDecided)
	default:
		return fmt.Errorf("deciding %s: %w (%s by %s)", id, ErrDecided, st, by)
	}
}

// MaxDecider bounds who decided (Decision.By) as recorded.
const MaxDecider = 200

// normalize checks d and cleans who decided as prepare cleans a request's
// fields: it reaches the audit, terminals and the agent whose call it
// decides, and part of it may come from elsewhere (the dashboard user
// another instance passed a decision on for).
func normalize(d Decision) (Decision, error) {
	if d.By == "" {
		return d, ErrNoDecider
	}
	d.By = cut(clean(d.By), MaxDecider)
	d.Scope = cmp.Or(d.Scope, ScopeOnce)
	switch d.Scope {
	case ScopeOnce, ScopeSession, ScopeAlways:
	default:
		return d, fmt.Errorf("deciding with scope %q (once, session or always): %w", d.Scope, ErrBadScope)
	}
	if !d.Allow {
		d.Scope = ScopeOnce
	}
	return d, nil
}

// settle makes d the decision of pending request id, if it is still
// pending here: the one caller that removes it from the map finishes it.
func (b *Broker) settle(id string, d Decision) error {
	b.mu.Lock()
	w, ok := b.pending[id]
	if ok && w.req.Kind == KindTrust && d.Allow && d.Scope != ScopeOnce {
		// Refused before it is taken: the request stays for a right answer.
		b.mu.Unlock()
		return fmt.Errorf("deciding %s: a trust request pins one definition, scope %q is for calls: %w", id, d.Scope, ErrBadScope)
	}
	delete(b.pending, id)
	if ok {
		b.settling[id] = w
	}
	b.mu.Unlock()
	if !ok {
		return ErrUnknown
	}
	b.finish(w, d)
	b.mu.Lock()
	delete(b.settling, id)
	b.mu.Unlock()
	return w.err
}

// finish records d for w, remembers a scoped allow, audits, and releases
// the Ask. A storage failure turns an allow into a deny: fail closed.
// Preconditions: the caller alone owns w (it took w out of b.pending or
// never put it there).
func (b *Broker) finish(w *waiter, d Decision) {
	now := b.now()
	if w.req.Kind != KindCall && d.Allow {
		d.Scope = ScopeOnce // a tool definition is trusted as it is, not remembered
	}
	err := b.store.finish(context.Background(), w.req.ID, d, now)
	if err == nil && d.Allow && d.Scope != ScopeOnce {
		err = b.remember(w.req, d, now)
	}
	if err != nil {
		d = Decision{Scope: ScopeOnce, By: d.By, Reason: "recording the decision failed"}
	}
	w.decision, w.err = d, err
	b.onDecision(w.req, d)
	close(w.done)
	if err == nil && d.Allow && d.Scope != ScopeOnce {
		b.settleCovered(w.req, d.Scope)
	}
}

// settleCovered allows the calls already waiting that an allow of req for
// scope now covers (same client, server and tool; same session for
// ScopeSession), as recall allows the ones that come after it: a person
// who chose "for the session" should not have to answer them again.
// Each is recorded as allowed once, by "remembered:" and req's ID.
func (b *Broker) settleCovered(req Request, scope string) {
	var ids []string
	b.mu.Lock()
	for id, o := range b.pending {
		r := o.req
		if r.Kind == KindCall && r.Client == req.Client && r.Server == req.Server && r.Tool == req.Tool &&
			(scope == ScopeAlways || r.Session != "" && r.Session == req.Session) {
			ids = append(ids, id)
		}
	}
	b.mu.Unlock()
	for _, id := range ids {
		// ErrUnknown: decided meanwhile by someone else, which stands.
		_ = b.settle(id, Decision{Allow: true, Scope: ScopeOnce, By: "remembered:" + req.ID})
	}
}

func (b *Broker) remember(req Request, d Decision, now time.Time) error {
	m := Remembered{ID: req.ID, Client: req.Client, Server: req.Server, Tool: req.Tool, Scope: d.Scope, By: d.By, Time: now}
	if d.Scope == ScopeAlways {
		return b.store.remember(context.Background(), m)
	}
	if req.Session == "" {
		return nil // no session to scope it to: it was a once
	}
	m.Session = req.Session
	b.mu.Lock()
	b.sessions[sessionKey{req.Client, req.Session, req.Server, req.Tool}] = m
	b.mu.Unlock()
	return nil
}

// Pending returns the requests waiting for a decision, oldest first.
func (b *Broker) Pending() []Request {
	b.mu.Lock()
	out := make([]Request, 0, len(b.pending))
	for _, w := range b.pending {
		out = append(out, w.req)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y Request) int {
		return cmp.Or(x.Time.Compare(y.Time), strings.Compare(x.ID, y.ID))
	})
	return out
}

// Remembered returns the remembered decisions: session scoped ones of this
// process and always scoped ones from the store, oldest first. A store
// error yields the session scoped ones alone.
func (b *Broker) Remembered() []Remembered {
	stored, _ := b.store.listRemembered(context.Background())
	b.mu.Lock()
	out := stored
	for _, m := range b.sessions {
		out = append(out, m)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y Remembered) int {
		return cmp.Or(x.Time.Compare(y.Time), strings.Compare(x.ID, y.ID))
	})
	return out
}

// Revoke forgets the remembered decision id; ErrUnknown if there is none.
func (b *Broker) Revoke(id string) error {
	b.mu.Lock()
	for k, m := range b.sessions {
		if m.ID == id {
			delete(b.sessions, k)
			b.mu.Unlock()
			return nil
		}
	}
	b.mu.Unlock()
	ok, err := b.store.forget(context.Background(), id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("revoking %s: %w", id, ErrUnknown)
	}
	return nil
}

// EndSession forgets the session scoped decisions of session.
func (b *Broker) EndSession(session string) {
	session = clean(session) // as Ask stored it
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.sessions {
		if k.session == session {
			delete(b.sessions, k)
		}
	}
}

// Close denies every pending request (By "cancelled") and makes later Asks
// deny at once. It does not close Options.DB.
func (b *Broker) Close() {
	b.mu.Lock()
	b.closed = true
	ids := make([]string, 0, len(b.pending))
	for id := range b.pending {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		b.settle(id, Decision{Scope: ScopeOnce, By: ByCancelled, Reason: "approval broker closed"})
	}
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newID returns "apr_" and 12 random base32 characters (60 bits).
func newID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making approval id: %w", err)
	}
	return "apr_" + strings.ToLower(idEncoding.EncodeToString(b[:])[:12]), nil
}
