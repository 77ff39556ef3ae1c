//go:build linux

package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Latency summarizes durations, in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	// Nearest rank: the smallest value with at least q of all at or below.
	q := func(q float64) float64 {
		i := int(float64(len(s))*q+0.999999) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	return Latency{N: len(s), Mean: ms(sum / time.Duration(len(s))), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Phase is one measured part of a run.
type Phase struct {
	Name     string `json:"name"`
	Sessions int    `json:"sessions"`
	Calls    int    `json:"calls"` // attempted
	OK       int    `json:"ok"`
	Failed   int    `json:"failed"`
	// Errors counts failed calls and sessions by kind (connect, timeout,
	// transport, rpc_CODE, tool_error, wrong_result, close).
	Errors map[string]int `json:"errors,omitempty"`
	// FirstErrors are the first few failures, verbatim.
	FirstErrors []string `json:"first_errors,omitempty"`
	Seconds     float64  `json:"seconds"`
	CallsPerSec float64  `json:"calls_per_s"`
	Latency     Latency  `json:"latency"`
	// ByServer is the latency of each server's calls.
	ByServer map[string]Latency `json:"by_server,omitempty"`
	// Connect is the time to open a session (initialize, which starts
	// or joins its sandboxes).
	Connect Latency `json:"connect"`
	// Jitter is how late a goroutine of the driver woke from 1 ms sleeps
	// during the phase: the machine's own scheduling delay, which every
	// call's latency includes (the host is shared).
	Jitter Latency `json:"sched_jitter"`
	// GatewayCPU is the gateway's CPU time (user+system) during the phase
	// per call, in ms; -1 if unknown.
	GatewayCPU float64 `json:"gateway_cpu_ms_per_call"`
}

// recorder collects one phase's results from many goroutines.
type recorder struct {
	mu       sync.Mutex
	phase    Phase                      // guarded by mu
	lat      []time.Duration            // guarded by mu
	byServer map[string][]time.Duration // guarded by mu
	window   []time.Duration            // guarded by mu: since the last sample
	connect  []time.Duration            // guarded by mu
	expected *ledger
	start    time.Time
}

// recordKey is what one call record is counted under.
type recordKey struct{ session, server, tool string }

// ledger counts the calls sent, which each owe one audit record.
type ledger struct {
	mu sync.Mutex
	n  map[recordKey]int // guarded by mu
}

func (l *ledger) add(k recordKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[k]++
}

func newRecorder(name string, expected *ledger) *recorder {
	return &recorder{phase: Phase{Name: name, Errors: map[string]int{}}, expected: expected, start: time.Now(),
		byServer: map[string][]time.Duration{}}
}

// sent counts a call the gateway may have received: it owes one record.
func (r *recorder) sent(session string, t target) {
	r.expected.add(recordKey{session, t.server, t.tool})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase.Calls++
}

func (r *recorder) ok(server string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase.OK++
	r.lat = append(r.lat, d)
	r.window = append(r.window, d)
	r.byServer[server] = append(r.byServer[server], d)
}

func (r *recorder) connected(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase.Sessions++
	r.connect = append(r.connect, d)
}

// fail counts a failure of kind; call says whether it was a call's.
func (r *recorder) fail(kind string, call bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if call {
		r.phase.Failed++
	}
	r.phase.Errors[kind]++
	if len(r.phase.FirstErrors) < 10 {
		r.phase.FirstErrors = append(r.phase.FirstErrors, fmt.Sprintf("%s: %v", kind, err))
	}
}

// progress returns the calls done and the latency of those that ended
// since the last call of progress.
func (r *recorder) progress() (int, Latency) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.window
	r.window = nil
	return r.phase.OK + r.phase.Failed, summarize(w)
}

// finish closes the phase; elapsed is measured from start, or from
// since if not zero.
func (r *recorder) finish(since time.Time) *Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	if since.IsZero() {
		since = r.start
	}
	p := r.phase
	p.Seconds = time.Since(since).Seconds()
	if p.Seconds > 0 {
		p.CallsPerSec = float64(p.OK) / p.Seconds
	}
	p.Latency = summarize(r.lat)
	if len(r.byServer) > 1 {
		p.ByServer = map[string]Latency{}
		for k, ds := range r.byServer {
			p.ByServer[k] = summarize(ds)
		}
	}
	p.Connect = summarize(r.connect)
	return &p
}

// errorKind names a failed call's error for the counts.
func errorKind(ctx context.Context, err error) string {
	var we *jsonrpc.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return "timeout"
	case errors.As(err, &we):
		return fmt.Sprintf("rpc_%d", we.Code)
	default:
		return "transport"
	}
}

// Sample is the gateway's resources at one moment; -1 where unknown.
type Sample struct {
	Seconds float64 `json:"t_s"`   // since the run started
	Calls   int     `json:"calls"` // done in the current phase
	// P99 and Max are of the calls that ended since the last sample (ms).
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	RSS        int64   `json:"rss_bytes"`
	FDs        int     `json:"fds"`
	Threads    int     `json:"threads"`
	Goroutines int     `json:"goroutines"`
	// Sandboxes running, paused or stopping, as `mcpbox ps` lists them.
	Sandboxes int `json:"sandboxes"`
	// CPU is the gateway's CPU time so far (user+system, s).
	CPU float64 `json:"cpu_s"`
	// Cgroups are the sandbox cgroup dirs under the gateway's own cgroup
	// (one hierarchy; another mcpbox in the same cgroup counts too).
	Cgroups int `json:"cgroups"`
	// Mounts under the run's temp dir in the gateway's mount namespace.
	Mounts    int `json:"mounts"`
	MountsAll int `json:"mounts_all"`
	// SessionDirs are scope-session workspace dirs left in the state dir.
	SessionDirs int `json:"session_dirs"`
}

// Audit is the check of the call records against the calls made.
type Audit struct {
	CallRecords int `json:"call_records"` // of this run's sessions
	Expected    int `json:"expected"`
	// Missing and Extra count calls without a record and records beyond
	// one per call, per (session, server, tool).
	Missing int `json:"missing"`
	Extra   int `json:"extra"`
	// Outcomes counts the records' outcomes.
	Outcomes map[string]int `json:"outcomes"`
	Verified bool           `json:"verified"`
	Verify   string         `json:"verify"` // `mcpbox logs verify`'s output or error
}

// Report is what Run measured.
type Report struct {
	Scenario    string  `json:"scenario"`
	Server      string  `json:"server"`
	Scope       string  `json:"scope"`
	Clients     int     `json:"clients"`
	Sessions    int     `json:"sessions"`
	Calls       int     `json:"calls_per_session"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"` // calls/s asked for; 0: unpaced

	Idle *Phase `json:"idle,omitempty"`
	Load *Phase `json:"load"`
	// P99Ratio is the load's p99 over the idle p99.
	P99Ratio float64 `json:"p99_ratio,omitempty"`

	Samples []Sample `json:"samples"`
	// Before and After bracket the churn (after warm-up; after settling);
	// for calls, After is taken once every session is closed and Settle
	// has passed.
	Before *Sample `json:"before,omitempty"`
	After  *Sample `json:"after,omitempty"`

	Audit Audit `json:"audit"`
	// Stop is how the gateway Run started took SIGTERM ("" is exit 0).
	Stop string `json:"stop,omitempty"`
}

// Leak tolerances of [Report.Problems]: the gateway may keep a few pooled
// connections and goroutines, and Go returns freed heap to the kernel
// lazily.
const (
	LeakFDs        = 8
	LeakGoroutines = 20
	LeakRSS        = 64 << 20
)

// Problems lists every way the run missed its targets: failed calls, a
// call without exactly one record, a chain that does not verify, a p99
// over 10× idle, a gateway that did not stop cleanly, and (churn)
// growth past the Leak tolerances.
func (r *Report) Problems() []string {
	var ps []string
	add := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	for _, p := range []*Phase{r.Idle, r.Load} {
		if p != nil && (p.Failed > 0 || len(p.Errors) > 0) {
			add("%s: %d of %d calls failed: %v", p.Name, p.Failed, p.Calls, p.Errors)
		}
	}
	if r.Audit.Missing > 0 || r.Audit.Extra > 0 {
		add("audit: %d calls without a record, %d extra records (of %d calls)", r.Audit.Missing, r.Audit.Extra, r.Audit.Expected)
	}
	if !r.Audit.Verified {
		add("audit: the chain does not verify: %s", r.Audit.Verify)
	}
	if r.P99Ratio > 10 {
		add("p99 under load is %.1f× the idle p99 (target ≤ 10×)", r.P99Ratio)
	}
	if r.Stop != "" {
		add("gateway stop: %s", r.Stop)
	}
	if b, a := r.Before, r.After; b != nil && a != nil {
		grew := func(what string, before, after, tol int64) {
			if after > before+tol {
				add("leak: %s grew from %d to %d (tolerance %d)", what, before, after, tol)
			}
		}
		grew("fds", int64(b.FDs), int64(a.FDs), LeakFDs)
		grew("goroutines", int64(b.Goroutines), int64(a.Goroutines), LeakGoroutines)
		grew("rss bytes", b.RSS, a.RSS, LeakRSS)
		grew("sandboxes", int64(b.Sandboxes), int64(a.Sandboxes), 0)
		grew("cgroups", int64(b.Cgroups), int64(a.Cgroups), 0)
		grew("mounts", int64(b.Mounts), int64(a.Mounts), 0)
		grew("session dirs", int64(b.SessionDirs), int64(a.SessionDirs), 0)
	}
	return ps
}

// Print writes the report for a reader.
func (r *Report) Print(w io.Writer) {
	rate := "unpaced"
	if r.Rate > 0 {
		rate = fmt.Sprintf("paced at %.0f calls/s", r.Rate)
	}
	fmt.Fprintf(w, "scenario %s, server %s (scope %s): %d clients, %d sessions × %d calls, concurrency %d, %s\n",
		r.Scenario, r.Server, r.Scope, r.Clients, r.Sessions, r.Calls, r.Concurrency, rate)
	for _, p := range []*Phase{r.Idle, r.Load} {
		if p == nil {
			continue
		}
		fmt.Fprintf(w, "%-5s %d sessions, %d calls: %d ok, %d failed in %.1f s = %.0f calls/s; latency ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f; connect ms p50 %.1f p99 %.1f max %.1f\n",
			p.Name, p.Sessions, p.Calls, p.OK, p.Failed, p.Seconds, p.CallsPerSec, p.Latency.P50, p.Latency.P99, p.Latency.P999, p.Latency.Max,
			p.Connect.P50, p.Connect.P99, p.Connect.Max)
		fmt.Fprintf(w, "      gateway CPU %.2f ms per call; the host's scheduling delay (1 ms sleeps) ms p50 %.2f p99 %.2f max %.2f\n",
			p.GatewayCPU, p.Jitter.P50, p.Jitter.P99, p.Jitter.Max)
		for _, k := range slices.Sorted(maps.Keys(p.ByServer)) {
			l := p.ByServer[k]
			fmt.Fprintf(w, "      %s: %d calls, latency ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f\n", k, l.N, l.P50, l.P99, l.P999, l.Max)
		}
		if len(p.Errors) > 0 {
			keys := slices.Sorted(maps.Keys(p.Errors))
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s=%d", k, p.Errors[k]))
			}
			fmt.Fprintf(w, "      errors: %s\n      first: %s\n", strings.Join(parts, " "), strings.Join(p.FirstErrors, "\n             "))
		}
	}
	if r.P99Ratio > 0 {
		fmt.Fprintf(w, "p99 load/idle: %.1f×\n", r.P99Ratio)
	}
	if len(r.Samples) > 0 {
		var peak Sample
		for _, s := range r.Samples {
			peak.RSS = max(peak.RSS, s.RSS)
			peak.FDs = max(peak.FDs, s.FDs)
			peak.Threads = max(peak.Threads, s.Threads)
			peak.Goroutines = max(peak.Goroutines, s.Goroutines)
			peak.Sandboxes = max(peak.Sandboxes, s.Sandboxes)
			peak.Cgroups = max(peak.Cgroups, s.Cgroups)
		}
		first, last := r.Samples[0], r.Samples[len(r.Samples)-1]
		fmt.Fprintf(w, "gateway: rss MiB %.1f → peak %.1f → %.1f; fds %d → peak %d → %d; threads peak %d; goroutines %d → peak %d → %d; sandboxes peak %d, sandbox cgroups peak %d (%d samples)\n",
			mib(first.RSS), mib(peak.RSS), mib(last.RSS), first.FDs, peak.FDs, last.FDs, peak.Threads,
			first.Goroutines, peak.Goroutines, last.Goroutines, peak.Sandboxes, peak.Cgroups, len(r.Samples))
	}
	if a := r.After; a != nil && r.Before == nil {
		fmt.Fprintf(w, "after closing every session and settling: rss MiB %.1f, fds %d, threads %d, goroutines %d, sandboxes %d, cgroups %d, mounts %d\n",
			mib(a.RSS), a.FDs, a.Threads, a.Goroutines, a.Sandboxes, a.Cgroups, a.Mounts)
	}
	if b, a := r.Before, r.After; b != nil && a != nil {
		fmt.Fprintf(w, "leak check (before → after settling): rss MiB %.1f → %.1f, fds %d → %d, threads %d → %d, goroutines %d → %d, sandboxes %d → %d, cgroups %d → %d, mounts %d → %d (all %d → %d), session dirs %d → %d\n",
			mib(b.RSS), mib(a.RSS), b.FDs, a.FDs, b.Threads, a.Threads, b.Goroutines, a.Goroutines, b.Sandboxes, a.Sandboxes,
			b.Cgroups, a.Cgroups, b.Mounts, a.Mounts, b.MountsAll, a.MountsAll, b.SessionDirs, a.SessionDirs)
	}
	oc := slices.Sorted(maps.Keys(r.Audit.Outcomes))
	var parts []string
	for _, k := range oc {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.Audit.Outcomes[k]))
	}
	fmt.Fprintf(w, "audit: %d call records for %d calls, %d missing, %d extra; outcomes %s; chain verified: %v\n",
		r.Audit.CallRecords, r.Audit.Expected, r.Audit.Missing, r.Audit.Extra, strings.Join(parts, " "), r.Audit.Verified)
	if ps := r.Problems(); len(ps) > 0 {
		fmt.Fprintf(w, "PROBLEMS:\n  %s\n", strings.Join(ps, "\n  "))
	} else {
		fmt.Fprintln(w, "targets met: no failed call, one record per call, chain verified")
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
