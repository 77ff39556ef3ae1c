package sandbox

import (
	"context"
	"sync"
)

// Pool keeps up to a bounded number of sandboxes prepared from one Spec
// (Prepare), so that Start of a matching Spec only sends the workload:
// the warm pool of `serve` (issue 19). Each sandbox waiting in the pool
// holds its init (about the memory of an idle sandbox's helpers), its
// cgroup and its namespaces. A Spec that does not match, or a Start while
// the pool is empty, starts cold; every Start that took a prepared
// sandbox has the pool prepare the next one in the background.
type Pool struct {
	spec Spec
	key  string // warmKey(spec)
	size int
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	ready   []*Prepared   // guarded by mu
	filling int           // guarded by mu: Prepares under way
	failed  error         // guarded by mu: the last Prepare's error; no refill while set
	closed  bool          // guarded by mu
	changed chan struct{} // guarded by mu: closed and replaced when a Prepare ends
}

// NewPool returns a pool that keeps size sandboxes prepared from spec,
// and starts preparing them. A size below one, or a Spec that cannot be
// prepared (Prepare), makes a pool that always starts cold.
func NewPool(spec Spec, size int) *Pool {
	ctx, stop := context.WithCancel(context.Background())
	p := &Pool{spec: spec, key: warmKey(spec), size: size, ctx: ctx, stop: stop, changed: make(chan struct{})}
	if p.key == "" {
		p.size = 0
	}
	p.refill()
	return p
}

// Start starts spec's workload in a prepared sandbox when spec matches
// the pool's, else as Start does. With none ready but one being
// prepared, it waits for that one, which is further along than a cold
// start would be.
func (p *Pool) Start(ctx context.Context, spec Spec, stdio Stdio) (*Sandbox, error) {
	defer p.refill() // after a take, or a failed Prepare forgotten
	var key string
	if p.key != "" {
		key = warmKey(spec)
	}
	for {
		w := p.take(ctx, key)
		if w == nil {
			return Start(ctx, spec, stdio)
		}
		if w.alive() {
			return w.start(ctx, spec, key, stdio)
		}
		// Its init died while it waited (killed from outside, OOM): the
		// start must not fail for it; the next one or a cold start serves.
		w.Close()
	}
}

// take removes a prepared sandbox from the pool if key, a Spec's
// warmKey, is the pool's, waiting for one being prepared if none is
// ready; nil: start cold.
func (p *Pool) take(ctx context.Context, key string) *Prepared {
	if p.key == "" || key != p.key {
		return nil
	}
	for {
		p.mu.Lock()
		if len(p.ready) > 0 {
			w := p.ready[0]
			p.ready = p.ready[1:]
			p.mu.Unlock()
			return w
		}
		if p.filling == 0 || p.closed {
			p.failed = nil // a Start is a reason to try again
			p.mu.Unlock()
			return nil
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// Ready returns how many prepared sandboxes wait in the pool, and the
// error of the last Prepare if it failed.
func (p *Pool) Ready() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready), p.failed
}

// refill starts Prepares until the pool is full or one failed.
func (p *Pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && p.failed == nil && len(p.ready)+p.filling < p.size {
		p.filling++
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			w, err := Prepare(p.ctx, p.spec)
			p.mu.Lock()
			p.filling--
			close(p.changed)
			p.changed = make(chan struct{})
			closed := p.closed
			switch {
			case err != nil:
				p.failed = err
			case !closed:
				p.ready = append(p.ready, w)
			}
			p.mu.Unlock()
			if err == nil && closed {
				w.Close()
			}
		}()
	}
}

// Close removes every prepared sandbox and waits for them to end.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, w := range ready {
		w.Close()
	}
	p.stop() // kills those still being prepared
	p.wg.Wait()
}
