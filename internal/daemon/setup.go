package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"log/slog"

	"mcpbox/internal/admin"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/specconv"
)

// A server that serve cannot set up at its start (its package does not
// install, its image does not pull) does not end serve: the gateway
// starts with the other servers, and the broken one is unavailable. Its
// tools are absent, a call naming it gets an error saying why (the
// gateway's "did not start for this session"), and the start, the log,
// the audit, `mcpbox ps` and the dashboard say so. Each new session
// retries the setup (at most once per retryEvery; in serve, in the
// background: pending.readyChan), so a registry that
// was unreachable or a package published since brings the server up
// without a restart. With Options.Strict, serve fails at its start
// instead, as it did before; when every server fails, it fails too.
//
// A package still installing when serve's start has waited installWait
// installs on in the background: its server is unavailable ("installing")
// until then, the sessions' starts wait for it outside their start
// timeout (gateway.Server.Ready), and it joins the sessions that began
// meanwhile once it runs, announced by list_changed.

// retryEvery is how often an unavailable server's setup is retried at
// most: a burst of sessions does not make a burst of registry requests.
const retryEvery = 10 * time.Second

// SetupError is a server that could not be set up: its package did not
// install or its image did not pull.
type SetupError struct {
	Server string
	Err    error
}

// Error is the underlying error, which names the server.
func (e *SetupError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *SetupError) Unwrap() error { return e.Err }

// setups keeps which servers are unavailable and why, and tells the
// audit and the admin record when that changes.
type setups struct {
	// record writes an audit record; nil: none.
	record func(audit.Record)
	// redact makes a reason safe to show and store.
	redact func(string) string
	// log gets the retries' outcomes; nil: none.
	log *slog.Logger
	// changed is called with the unavailable servers after each change,
	// outside mu; nil: none.
	changed func(down map[string]string)
	now     func() time.Time
	// ctx is serve's, for the setups that run in the background (a
	// package's install, a retry: Server.Ready); nil: a retry runs in
	// the start that is due for it. cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	down map[string]string // guarded by mu; server name to why, one line
	// installs are the servers of down whose package is still installing
	// in the background. Guarded by mu.
	installs map[string]bool
	// final are the servers of down no retry sets up in this serve (an
	// env: secret unset). Guarded by mu.
	final map[string]bool
	// bg counts the goroutines of the background setups (installing,
	// readyChan).
	bg sync.WaitGroup
	// stopped is set by stop, before it waits for bg: no Add after it.
	// Guarded by mu.
	stopped bool

	// order is held from a change of down to the end of its record and
	// its call of changed, so that two changes (two servers' retries)
	// reach the audit and the admin record in the order they were made:
	// the last list `mcpbox ps` gets is the current one.
	order sync.Mutex
}

// The phases of a server's setup, in its audit records.
const (
	phaseStart   = "start"   // serve's start
	phaseRetry   = "retry"   // a new session's retry
	phaseInstall = "install" // its package's install in the background
)

// errInstalling is why a server whose package installs in the
// background is unavailable until then.
var errInstalling = errors.New("its package is still installing: it joins the sessions once installed")

// fail marks server unavailable for err (errInstalling: not yet ready)
// in phase.
func (st *setups) fail(server string, err error, phase string) {
	why := st.reason(server, err)
	st.order.Lock()
	defer st.order.Unlock()
	installing := phase == phaseInstall && err == errInstalling
	down := st.setDown(server, why, func() {
		if installing {
			if st.installs == nil {
				st.installs = map[string]bool{}
			}
			st.installs[server] = true
		} else {
			delete(st.installs, server)
		}
	})
	if st.record != nil {
		st.record(audit.Record{Event: audit.EventServerUnavailable, Server: server, Error: why,
			Detail: map[string]string{"phase": phase}})
	}
	if st.changed != nil {
		st.changed(down)
	}
}

// again marks server as being set up again (a retry in the background)
// after last: what mcpbox ps shows meanwhile. No audit record: the
// retry's outcome has one.
func (st *setups) again(server string, last error) {
	why := "setting it up again (last: " + st.reason(server, last) + ")"
	st.order.Lock()
	defer st.order.Unlock()
	down := st.setDown(server, why, func() {})
	if st.changed != nil {
		st.changed(down)
	}
}

// setDown records server as unavailable for why, runs also under mu,
// and returns the unavailable servers then. Called with order held.
func (st *setups) setDown(server, why string, also func()) map[string]string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.down == nil {
		st.down = map[string]string{}
	}
	st.down[server] = why
	also()
	return maps.Clone(st.down)
}

// ok marks server available after a retry or its background install
// (phase) set it up.
func (st *setups) ok(server, phase string) {
	st.order.Lock()
	defer st.order.Unlock()
	st.mu.Lock()
	delete(st.down, server)
	delete(st.installs, server)
	down := maps.Clone(st.down)
	st.mu.Unlock()
	if st.record != nil {
		st.record(audit.Record{Event: audit.EventServerUnavailable, Server: server, Decision: "recovered",
			Detail: map[string]string{"phase": phase}})
	}
	if st.changed != nil {
		st.changed(down)
	}
}

// Down returns the unavailable servers and why; nil st has none.
func (st *setups) Down() map[string]string {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.down)
}

// reason is err on one line, redacted, without the "server NAME: " the
// context already gives, its control characters escaped: a registry's
// text (a version it lists, an error npm or an image registry quotes)
// is in it, and it is printed on terminals (serve's warning, mcpbox ps),
// where an escape sequence or a carriage return could rewrite what is
// shown.
func (st *setups) reason(server string, err error) string {
	msg := strings.TrimPrefix(oneLine(err), "server "+server+": ")
	if st.redact != nil {
		msg = st.redact(msg)
	}
	return escapeControls(msg)
}

// escapeControls writes s's control characters (C0, DEL, C1) and the
// Unicode ones that reorder or break a line (bidi controls, LS, PS) as
// \xNN or \uNNNN; a byte that is not UTF-8 becomes U+FFFD.
func escapeControls(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r < 0xa0, r == 0x061c, r == 0x200e, r == 0x200f,
			r >= 0x2028 && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Installing reports whether server's package is still installing in
// the background; nil st: no.
func (st *setups) Installing(server string) bool {
	_, installing := st.state()
	return installing[server]
}

// state returns the unavailable servers and why, and which of them are
// installing, at one moment; nil st has none.
func (st *setups) state() (down map[string]string, installing map[string]bool) {
	if st == nil {
		return nil, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.down), maps.Clone(st.installs)
}

// stop cancels the background setups and waits for their goroutines
// to end.
func (st *setups) stop() {
	if st == nil {
		return
	}
	st.mu.Lock()
	st.stopped = true
	st.mu.Unlock()
	if st.cancel != nil {
		st.cancel()
	}
	st.bg.Wait()
}

// begin counts a background setup in bg unless stop has begun.
func (st *setups) begin() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped {
		return false
	}
	st.bg.Add(1)
	return true
}

// names lists the servers of down in order.
func names(down map[string]string) []string {
	out := make([]string, 0, len(down))
	for n := range down {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// pending is the gateway server of an unavailable server: its Launch
// retries the setup (at most once per retryEvery, under the start's
// context) and, once that succeeds, launches what it set up.
type pending struct {
	name string
	st   *setups
	// setup sets the server up as serve's start would have: its launcher
	// and release. nil: no retry in this serve (restart serve).
	setup func(ctx context.Context) (*gateway.Server, error)

	mu    sync.Mutex
	ready *gateway.Server // guarded by mu; nil until a setup succeeded
	err   error           // guarded by mu; why the last setup failed
	tried time.Time       // guarded by mu; when it was tried last
	// retrying is closed when the retry under way ends; nil when none
	// is. Guarded by mu. The retry runs without mu: an install can take
	// minutes, and the other sessions' starts wait for its outcome only
	// as long as their own contexts let them.
	retrying chan struct{}
}

// unavailable makes gs the pending server for name, which failed with err.
func (st *setups) unavailable(gs *gateway.Server, err error, setup func(context.Context) (*gateway.Server, error)) {
	p := &pending{name: gs.Name, st: st, setup: setup, err: err, tried: st.now()}
	if setup == nil {
		st.mu.Lock()
		if st.final == nil {
			st.final = map[string]bool{}
		}
		st.final[gs.Name] = true
		st.mu.Unlock()
	}
	st.fail(gs.Name, err, phaseStart)
	gs.Launch, gs.Release, gs.Ready = p.launch, p.release, p.readyChan
}

// closed is a closed channel: nothing to wait for.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// readyChan is the server's gateway.Server.Ready: the setup under way,
// or a retry it begins in the background when one is due (st.ctx set),
// or closed: Launch then launches the set-up server or says why not.
// In the background, a retry (an install of minutes) is not bounded by
// the start's timeout, and the sessions do not wait for it.
func (p *pending) readyChan() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retrying != nil {
		return p.retrying
	}
	ctx := p.st.ctx
	if p.ready != nil || p.setup == nil || ctx == nil || ctx.Err() != nil || p.st.now().Sub(p.tried) < retryEvery || !p.st.begin() {
		return closed
	}
	p.tried = p.st.now()
	done := make(chan struct{})
	p.retrying = done
	p.st.again(p.name, p.err)
	go func() {
		defer p.st.bg.Done()
		gs, err := p.setup(ctx)
		p.mu.Lock()
		p.tried = p.st.now() // the next retry is due retryEvery after this one ended
		p.mu.Unlock()
		p.finish(gs, err, phaseRetry, ctx.Err() != nil && errors.Is(err, context.Canceled), done)
	}()
	return done
}

// installing makes gs the pending server for its server while its
// package installs in the background; done is closed when the install
// has ended, and then ready sets the server up with it (or says why
// not). A start waits for that (gs.Ready) outside its start timeout;
// after a failure, setup retries as for unavailable. The channel it
// returns is closed once that setup has ended, either way.
func (st *setups) installing(gs *gateway.Server, done <-chan struct{}, ready func() (*gateway.Server, error), setup func(context.Context) (*gateway.Server, error)) <-chan struct{} {
	installed := make(chan struct{})
	p := &pending{name: gs.Name, st: st, setup: setup, retrying: installed}
	st.fail(gs.Name, errInstalling, phaseInstall)
	gs.Launch, gs.Release, gs.Ready = p.launch, p.release, p.readyChan
	st.bg.Add(1)
	go func() {
		defer st.bg.Done()
		<-done
		got, err := ready()
		p.mu.Lock()
		p.tried = st.now()
		p.mu.Unlock()
		// Canceled: serve stopped, no fault of the server's.
		p.finish(got, err, phaseInstall, errors.Is(err, context.Canceled), installed)
	}()
	return installed
}

func (p *pending) launch(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
	gs, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	return gs.Launch(ctx, scope)
}

// get returns the set-up server, retrying the setup if it is due. A
// start while another's retry is under way waits for that retry's
// outcome, or for its own ctx, rather than starting one of its own.
func (p *pending) get(ctx context.Context) (*gateway.Server, error) {
	for {
		p.mu.Lock()
		if p.ready != nil {
			gs := p.ready
			p.mu.Unlock()
			return gs, nil
		}
		if wait := p.retrying; wait != nil && p.st.ctx == nil {
			p.mu.Unlock()
			select {
			case <-wait:
				continue // its outcome is this start's too
			case <-ctx.Done():
				p.mu.Lock()
				err := p.unavailableError()
				p.mu.Unlock()
				return nil, err
			}
		}
		// In serve (st.ctx set) only Ready retries, in the background:
		// never within a start's timeout.
		if p.setup == nil || p.st.ctx != nil || p.st.now().Sub(p.tried) < retryEvery {
			err := p.unavailableError()
			p.mu.Unlock()
			return nil, err
		}
		p.tried = p.st.now()
		done := make(chan struct{})
		p.retrying = done
		p.mu.Unlock()
		return p.retry(ctx, done)
	}
}

// retry runs the setup once for get, then ends the retry under way
// (done) with its outcome.
func (p *pending) retry(ctx context.Context, done chan struct{}) (*gateway.Server, error) {
	gs, err := p.setup(ctx)
	quiet := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if err := p.finish(gs, err, phaseRetry, quiet, done); err != nil {
		return nil, err
	}
	return gs, nil
}

// finish ends the setup under way (done, a retry or the background
// install: phase) with its outcome: gs set up, or err. A quiet failure
// (the end of the session or of serve that ran it) is no news of the
// server, and is not recorded.
func (p *pending) finish(gs *gateway.Server, err error, phase string, quiet bool, done chan struct{}) error {
	p.mu.Lock()
	defer func() {
		p.retrying = nil
		close(done)
		p.mu.Unlock()
	}()
	if err == nil {
		p.ready = gs
		p.st.ok(p.name, phase)
		if p.st.log != nil {
			msg := "server set up on retry: available again"
			if phase == phaseInstall {
				msg = "server's package installed: it joins the sessions"
			}
			p.st.log.Info(msg, "server", p.name)
		}
		return nil
	}
	if quiet && p.err != nil {
		return p.unavailableError()
	}
	p.err = err
	if quiet {
		return p.unavailableError()
	}
	p.st.fail(p.name, err, phase)
	if p.st.log != nil {
		msg := "server still unavailable: its setup failed again; a new session retries it"
		if phase == phaseInstall {
			msg = "server unavailable: its package did not install; a new session retries it"
			if errors.As(err, new(*SetupError)) { // installed, or not begun: the server's own setup failed
				msg = "server unavailable: it cannot be set up; a new session retries it"
			}
		}
		p.st.log.Warn(msg, "server", p.name, "err", p.st.reason(p.name, err))
	}
	return p.unavailableError()
}

// unavailableError is what a start of the server fails with: why, and
// when it is tried again. It started nothing (gateway.NotSetUp): no
// restart of the server's follows from it.
func (p *pending) unavailableError() error {
	if p.err == nil {
		return gateway.NotSetUp(fmt.Errorf("unavailable: %w", errInstalling))
	}
	retry := retryNote(p.setup == nil)
	return gateway.NotSetUp(fmt.Errorf("unavailable: serve could not set it up (%s): %s", retry, p.st.reason(p.name, p.err)))
}

func (p *pending) release(scope gateway.Scope) {
	p.mu.Lock()
	gs := p.ready
	p.mu.Unlock()
	if gs != nil && gs.Release != nil {
		gs.Release(scope)
	}
}

// newSetups is serve's record of its unavailable servers: in the audit,
// in the instance record (mcpbox ps), in the log for retries.
// Its background setups run under ctx until stop.
func (d *daemon) newSetups(ctx context.Context, g *guard.Guard, inst *admin.Instance) *setups {
	st := &setups{record: g.Record, redact: d.book.String, log: d.log, now: time.Now}
	st.ctx, st.cancel = context.WithCancel(ctx)
	if inst != nil {
		st.changed = func(down map[string]string) {
			inst.Update(func(r *instance.Record) { r.Unavailable = down })
		}
	}
	return st
}

// retryNote says when an unavailable server is set up again: final, it
// is not in this serve.
func retryNote(final bool) string {
	if final {
		return "restart mcpbox serve to retry"
	}
	return "a new session retries it"
}

// retryOf says when unavailable server is set up again (retryNote).
func (st *setups) retryOf(server string) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return retryNote(st.final[server])
}

// reportUnavailable tells the person who started serve which servers it
// runs without, once the gateway runs with the others.
func (d *daemon) reportUnavailable() {
	down, installs := d.setups.state()
	for _, name := range names(down) {
		installing := installs[name]
		retry := d.setups.retryOf(name)
		switch {
		case d.o.Unavailable != nil:
			d.o.Unavailable(Unavailable{Server: name, Reason: down[name], Installing: installing, Retry: retry})
		case installing:
			d.log.Info("server's package is still installing: it joins the sessions once installed", "server", name)
		default:
			d.log.Warn("server unavailable: serve could not set it up; "+retry, "server", name, "err", down[name])
		}
	}
}

// retryInstall installs s's package again for a pending server, and pins
// it as serve's start would have.
func (po packageOptions) retryInstall(ctx context.Context, s *config.Server) (specconv.Package, error) {
	pss, err := PackageServers(&config.Config{File: po.c.File, Servers: []*config.Server{s}})
	if err != nil {
		return specconv.Package{}, err
	}
	if len(pss) != 1 {
		return specconv.Package{}, fmt.Errorf("server %s is not a package server", s.Name)
	}
	pkg, change, err := po.installOne(ctx, pss[0], nil)
	if err != nil {
		return specconv.Package{}, err
	}
	if change != nil {
		if err := writePackagePins(po.lockPath, []PackageChange{*change}); err != nil {
			return specconv.Package{}, err
		}
	}
	return pkg, nil
}
