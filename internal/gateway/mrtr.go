package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Multi round-trip requests (SEP-2322) for 2026-07-28 clients, translated
// from a server's server→client requests.
//
// A 2026 client cannot be sent requests; a server initialized in the
// session-based protocol sends them (elicitation, sampling) while it works
// on a call. The gateway runs such a call in the background ("parked"):
// when the server asks something, the client's request is answered with an
// input_required result carrying the question as an input request and an
// opaque requestState; the client retries its request with the answers
// (inputResponses) and that state, and the gateway hands the answers to
// the waiting server and waits for its next question or its result.
//
// The requestState is the gateway's own: authenticated with a per-gateway
// random key (HMAC-SHA256), bound to the client identity, the method, the
// name called and the exact arguments, valid for one retry (its round) and
// until it expires. A state that fails any of these is refused and the
// parked call is not touched by it. Each state names the keys that signed
// it: one of a 2026 server that names other keys (another mcpbox
// upstream's) is the server's, and goes to it. The state holds no secret: it names the
// parked call and the round; the call itself never leaves the gateway.

// mrtrPrefix begins every requestState the gateway issues; a state without
// it is a server's own and is forwarded to the server.
const mrtrPrefix = "mcpbox1."

// mrtrTTL is how long a parked call waits for the client's retry: a human
// may be answering a form.
var mrtrTTL = 5 * time.Minute

// mrtrWindow is how long the gateway waits, after a server's first
// question, for more that belong in the same round (a server asks for
// several inputs at once).
const mrtrWindow = 25 * time.Millisecond

// maxParked bounds the parked calls of one gateway session.
const maxParked = 64

// errMRTRExpired ends a parked call whose client did not come back.
var errMRTRExpired = errors.New("the client did not answer the input request in time")

// mrtrKeys are a gateway's requestState keys. id names them in each
// state: a state of this gateway's, tampered with, is told apart from
// another mcpbox's upstream, whose states bear the same prefix.
type mrtrKeys struct {
	key [32]byte
	id  string
}

func newMRTRKeys() *mrtrKeys {
	k := &mrtrKeys{id: strings.ToLower(rand.Text())[:10]}
	rand.Read(k.key[:])
	return k
}

// stateClaims is what a requestState says.
type stateClaims struct {
	Call    string `json:"c"` // the parked call's id
	Round   uint64 `json:"r"` // valid for this round only
	Agent   string `json:"a"`
	Bind    string `json:"b"` // bindHash of method, name and arguments
	Expires int64  `json:"e"` // unix seconds
	Key     string `json:"k"` // mrtrKeys.id
}

func (k *mrtrKeys) sign(c stateClaims) string {
	c.Key = k.id
	payload, _ := json.Marshal(c)
	m := hmac.New(sha256.New, k.key[:])
	m.Write(payload)
	return mrtrPrefix + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// verify checks a state's signature and expiry and returns its claims.
func (k *mrtrKeys) verify(state string, now time.Time) (stateClaims, error) {
	rest, ok := strings.CutPrefix(state, mrtrPrefix)
	p64, s64, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return stateClaims{}, errors.New("malformed")
	}
	// One spelling per state: strict (no stray bits in the last
	// character), and no \r or \n, which encoding/base64 skips even
	// when strict.
	payload, err1 := base64.RawURLEncoding.Strict().DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.Strict().DecodeString(s64)
	if err1 != nil || err2 != nil || strings.ContainsAny(rest, "\r\n") {
		return stateClaims{}, errors.New("malformed")
	}
	m := hmac.New(sha256.New, k.key[:])
	m.Write(payload)
	if !hmac.Equal(sig, m.Sum(nil)) {
		return stateClaims{}, errors.New("not issued by this gateway")
	}
	var c stateClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return stateClaims{}, errors.New("malformed")
	}
	if now.Unix() > c.Expires {
		return stateClaims{}, errors.New("expired")
	}
	return c, nil
}

// foreign reports whether state, with this gateway's prefix, names other
// keys than its own: another mcpbox's, upstream. One that names these
// keys, or cannot be read, is this gateway's to verify (and refuse).
func (k *mrtrKeys) foreign(state string) bool {
	p64, _, _ := strings.Cut(strings.TrimPrefix(state, mrtrPrefix), ".")
	payload, err := base64.RawURLEncoding.DecodeString(p64)
	var c stateClaims
	return err == nil && json.Unmarshal(payload, &c) == nil && c.Key != "" && c.Key != k.id
}

// bindHash binds a state to what was called: the method, the name (tool,
// prompt or resource URI) and the arguments, byte for byte as compacted
// JSON.
func bindHash(method, name string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(compactJSON(args))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// compactJSON is raw with sorted keys and no insignificant space, so that
// the same arguments bind the same however the client spaced them.
func compactJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// parked is a call waiting for its client's answers.
type parked struct {
	id     string
	d      *downstream
	bind   string
	cancel context.CancelCauseFunc
	done   chan parkedResult // the call's end, once
	asks   chan *ask         // the server's questions

	mu      sync.Mutex
	round   uint64          // the round a state must name; guarded by mu
	waiting []*ask          // asked and not yet answered, in order; guarded by mu
	timer   *time.Timer     // expiry while the client is away; guarded by mu
	busy    bool            // a request of the client is handling it; guarded by mu
	nextKey int             // guarded by mu
	caps    map[string]bool // what the client declared it can answer (elicitation, sampling)
}

type parkedResult struct {
	raw json.RawMessage
	err error
}

// ask is one server→client request waiting for the client's answer.
type ask struct {
	key    string
	method string
	params json.RawMessage
	reply  chan askReply
}

type askReply struct {
	raw json.RawMessage
	err error
}

type parkedKey struct{}

func parkedOf(ctx context.Context) *parked {
	p, _ := ctx.Value(parkedKey{}).(*parked)
	return p
}

// ask hands a server's request to the client through the next
// input_required result and waits for the answer.
func (p *parked) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	cap := map[string]string{"elicitation/create": "elicitation", "sampling/createMessage": "sampling"}[method]
	if cap == "" || !p.caps[cap] {
		return nil, rpcError(jsonrpc.CodeInvalidRequest, "mcpbox: the client did not declare %s for this request", cmpOr(cap, method))
	}
	a := &ask{method: method, params: params, reply: make(chan askReply, 1)}
	select {
	case p.asks <- a:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	select {
	case r := <-a.reply:
		return r.raw, r.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mrtrCall runs exec for a 2026 request that may need the client's input:
// a new call is parked and run; a retry carrying the gateway's
// requestState resumes its parked call with the answers. It returns the
// call's raw result, or an input_required result while the call waits.
// refused, if not nil, is told why (UnknownStateRefused,
// UnknownTooManyWaiting) of a request refused before anything ran.
// serverStates says that the server speaks 2026 and may issue states of
// its own: one with this gateway's prefix that names other keys (another
// mcpbox's, upstream) then goes to the server, as any state not the
// gateway's does, rather than being refused. (Forged so, it starts the
// call anew, policy and approvals included.)
func (d *downstream) mrtrCall(ctx context.Context, method, name string, args json.RawMessage, state string, responses mcp.InputResponseMap,
	serverStates bool, exec func(context.Context) (json.RawMessage, error), refused func(why string)) (json.RawMessage, error) {
	bind := bindHash(method, name, args)
	if strings.HasPrefix(state, mrtrPrefix) && !(serverStates && d.gw.mrtr.foreign(state)) {
		p, err := d.resume(state, bind, responses)
		if err != nil {
			if refused != nil {
				refused(UnknownStateRefused)
			}
			return nil, err
		}
		return d.await(ctx, p)
	}
	p, err := d.park(ctx, bind, exec)
	if err != nil {
		if refused != nil {
			refused(UnknownTooManyWaiting)
		}
		return nil, err
	}
	return d.await(ctx, p)
}

// park starts exec in the background, bound to the session rather than to
// the request that started it.
func (d *downstream) park(ctx context.Context, bind string, exec func(context.Context) (json.RawMessage, error)) (*parked, error) {
	p := &parked{id: strings.ToLower(rand.Text()), d: d, bind: bind, done: make(chan parkedResult, 1), asks: make(chan *ask), busy: true, caps: map[string]bool{}}
	if m := modernOf(ctx); m != nil {
		p.caps = m.caps
	}
	d.mu.Lock()
	if d.parked == nil {
		d.parked = map[string]*parked{}
	}
	if len(d.parked) >= maxParked {
		d.mu.Unlock()
		return nil, rpcError(codeUnavailable, "mcpbox: too many calls waiting for input (%d); answer or abandon some first", maxParked)
	}
	d.parked[p.id] = p
	d.mu.Unlock()
	// The request's values (identity, era), not its cancellation: the call
	// outlives this request; the session ending or the expiry cancels it.
	pctx, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), parkedKey{}, p))
	stop := context.AfterFunc(d.ctx, func() { cancel(context.Cause(d.ctx)) })
	p.cancel = cancel
	go func() {
		defer stop()
		raw, err := exec(pctx)
		cancel(nil)
		p.done <- parkedResult{raw, err}
	}()
	return p, nil
}

// resume checks a retry's requestState and hands its answers to the
// questions of the round it names.
func (d *downstream) resume(state, bind string, responses mcp.InputResponseMap) (*parked, error) {
	c, err := d.gw.mrtr.verify(state, time.Now())
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "mcpbox: requestState refused: %v", err)
	}
	if c.Agent != d.agent || c.Bind != bind {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "mcpbox: requestState refused: issued for another client, method, name or arguments")
	}
	d.mu.Lock()
	p := d.parked[c.Call]
	d.mu.Unlock()
	if p == nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "mcpbox: requestState refused: the call it names has ended")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy || c.Round != p.round {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "mcpbox: requestState refused: already used")
	}
	p.round++ // single use: this state names a round that has passed
	p.busy = true
	if p.timer != nil {
		p.timer.Stop()
	}
	var left []*ask
	for _, a := range p.waiting {
		r, ok := responses[a.key]
		if !ok {
			left = append(left, a) // asked again in the next round
			continue
		}
		raw, err := json.Marshal(r)
		if err != nil {
			a.reply <- askReply{err: rpcError(jsonrpc.CodeInvalidParams, "bad input response %q", a.key)}
			continue
		}
		a.reply <- askReply{raw: raw}
	}
	p.waiting = left
	return p, nil
}

// await waits for the parked call's result, or for questions to put to
// the client; if the client's request ends first, the call is abandoned.
func (d *downstream) await(ctx context.Context, p *parked) (json.RawMessage, error) {
	var window <-chan time.Time
	p.mu.Lock()
	if len(p.waiting) > 0 {
		window = time.After(0) // unanswered questions go out again at once
	}
	p.mu.Unlock()
	for {
		select {
		case r := <-p.done:
			d.unpark(p)
			return r.raw, r.err
		case a := <-p.asks:
			p.mu.Lock()
			p.nextKey++
			a.key = "mcpbox-" + strconv.Itoa(p.nextKey)
			p.waiting = append(p.waiting, a)
			p.mu.Unlock()
			if window == nil {
				window = time.After(mrtrWindow)
			}
		case <-window:
			return d.inputRequired(p), nil
		case <-ctx.Done():
			p.cancel(context.Cause(ctx))
			d.unpark(p)
			return nil, context.Cause(ctx)
		}
	}
}

// inputRequired is the result that puts the waiting questions to the
// client, with a state for the next round; the call stays parked until the
// retry or the expiry.
func (d *downstream) inputRequired(p *parked) json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	reqs := make(map[string]any, len(p.waiting))
	for _, a := range p.waiting {
		reqs[a.key] = map[string]any{"method": a.method, "params": a.params}
	}
	state := d.gw.mrtr.sign(stateClaims{Call: p.id, Round: p.round, Agent: d.agent, Bind: p.bind, Expires: time.Now().Add(mrtrTTL).Unix()})
	p.busy = false
	p.timer = time.AfterFunc(mrtrTTL, func() {
		p.cancel(errMRTRExpired)
		d.unpark(p)
	})
	raw, _ := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": reqs, "requestState": state})
	return raw
}

func (d *downstream) unpark(p *parked) {
	d.mu.Lock()
	if d.parked[p.id] == p {
		delete(d.parked, p.id)
	}
	d.mu.Unlock()
}

// parkedIDs lists the parked calls, for tests.
func (d *downstream) parkedIDs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for id := range d.parked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
