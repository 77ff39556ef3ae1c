package policy

import (
	"container/list"
	"math"
	"sync"
	"time"

	"mcpbox/internal/config"
)

// MaxClientToolBuckets bounds the per-client buckets kept for one server;
// past it the least recently used bucket is dropped.
const MaxClientToolBuckets = 10_000

// Limiter applies each server's tools.rate_limit. It is safe for
// concurrent use.
type Limiter struct {
	now     func() time.Time
	servers map[string]*serverLimit // read-only after NewLimiter
}

// serverLimit holds one server's buckets.
type serverLimit struct {
	perMinuteName, perClientName string
	perClientRate                float64 // tokens per second; 0: no per-client limit
	capacityClient               float64

	mu      sync.Mutex
	server  *bucket                      // guarded by mu; nil: no per-minute limit
	clients map[clientTool]*list.Element // guarded by mu; values are *clientBucket
	lru     *list.List                   // guarded by mu; front: most recently used
}

type clientTool struct{ client, tool string }

type clientBucket struct {
	key clientTool
	b   bucket
}

// epsilon absorbs float rounding, so that waiting exactly the retryAfter
// that Allow returned is enough.
const epsilon = 1e-9

// bucket is a token bucket refilled continuously at rate tokens per second.
type bucket struct {
	rate, capacity, tokens float64
	last                   time.Time
}

// NewLimiter makes the buckets for c's rate limits; now nil: time.Now.
func NewLimiter(c *config.Config, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	l := &Limiter{now: now, servers: make(map[string]*serverLimit)}
	t0 := now()
	for _, s := range c.Servers {
		if s == nil || l.servers[s.Name] != nil {
			continue
		}
		rl := s.Tools.RateLimit
		if rl.PerMinute <= 0 && rl.PerClientTool <= 0 {
			continue
		}
		p := "servers." + s.Name + ".tools.rate_limit"
		sl := &serverLimit{perMinuteName: p + ".per_minute", perClientName: p + ".per_client_tool",
			clients: make(map[clientTool]*list.Element), lru: list.New()}
		if rl.PerMinute > 0 {
			b := newBucket(rl.PerMinute, rl.Burst, t0)
			sl.server = &b
		}
		if rl.PerClientTool > 0 {
			b := newBucket(rl.PerClientTool, rl.Burst, t0)
			sl.perClientRate, sl.capacityClient = b.rate, b.capacity
		}
		l.servers[s.Name] = sl
	}
	return l
}

func newBucket(perMinute, burst int, now time.Time) bucket {
	c := float64(burst)
	if burst <= 0 {
		c = float64(perMinute)
	}
	return bucket{rate: float64(perMinute) / 60, capacity: c, tokens: c, last: now}
}

// Allow takes a token from each bucket that applies to the call, or from
// none when one is empty. When limited it returns false, how long until
// every bucket has a token, and which limit was hit (the one with the
// longer wait).
func (l *Limiter) Allow(client, server, tool string) (ok bool, retryAfter time.Duration, limit string) {
	sl := l.servers[server]
	if sl == nil {
		return true, 0, ""
	}
	now := l.now()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	var cb *bucket
	if sl.perClientRate > 0 {
		cb = sl.clientBucket(clientTool{client, tool}, now)
	}
	var wait time.Duration
	if sl.server != nil {
		sl.server.refill(now)
		if w := sl.server.wait(); w > 0 {
			wait, limit = w, sl.perMinuteName
		}
	}
	if cb != nil {
		cb.refill(now)
		if w := cb.wait(); w > wait {
			wait, limit = w, sl.perClientName
		}
	}
	if wait > 0 {
		return false, wait, limit
	}
	if sl.server != nil {
		sl.server.tokens--
	}
	if cb != nil {
		cb.tokens--
	}
	return true, 0, ""
}

// clientBucket finds or makes the bucket for key, marking it most recently
// used. Preconditions: sl.mu held.
func (sl *serverLimit) clientBucket(key clientTool, now time.Time) *bucket {
	if el, ok := sl.clients[key]; ok {
		sl.lru.MoveToFront(el)
		return &el.Value.(*clientBucket).b
	}
	sl.evict(now)
	cb := &clientBucket{key: key, b: bucket{rate: sl.perClientRate, capacity: sl.capacityClient,
		tokens: sl.capacityClient, last: now}}
	sl.clients[key] = sl.lru.PushFront(cb)
	return &cb.b
}

// evict drops idle buckets (full again by now, so nothing is lost) from the
// least recently used end, and the least recently used one when the map is
// at its bound. Preconditions: sl.mu held.
func (sl *serverLimit) evict(now time.Time) {
	for el := sl.lru.Back(); el != nil; el = sl.lru.Back() {
		cb := el.Value.(*clientBucket)
		idle := cb.b.full(now)
		if !idle && sl.lru.Len() < MaxClientToolBuckets {
			return
		}
		sl.lru.Remove(el)
		delete(sl.clients, cb.key)
	}
}

func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.capacity, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// full reports whether the bucket has refilled completely by now.
func (b *bucket) full(now time.Time) bool {
	return b.tokens+now.Sub(b.last).Seconds()*b.rate >= b.capacity-epsilon
}

// wait is how long until the bucket holds a whole token; 0 if it does.
func (b *bucket) wait() time.Duration {
	if b.tokens >= 1-epsilon {
		return 0
	}
	return time.Duration(math.Ceil((1 - b.tokens) / b.rate * float64(time.Second)))
}
