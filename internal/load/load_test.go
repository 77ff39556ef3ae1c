//go:build linux

package load

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The driver at a reduced size against the built binary: the CI form of
// the targets in docs/reliability.md (scripts/load.sh runs the full ones).

var mcpboxBin string // built once by TestMain

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if runtime.GOOS != "linux" || testing.Short() {
		return m.Run() // the driver tests skip themselves
	}
	dir, err := os.MkdirTemp("", "mcpbox-load-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	mcpboxBin = filepath.Join(dir, "mcpbox")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", mcpboxBin, "mcpbox/cmd/mcpbox")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building mcpbox: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

func requireBinary(t *testing.T) {
	t.Helper()
	if mcpboxBin == "" {
		t.Skip("needs Linux and no -short: the driver runs the built mcpbox")
	}
}

// nodeModules returns the npm peers of the e2e tests, or "" (skipping the
// npm server) when they are not installed and CI did not promise them.
func nodeModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../test/e2e/node/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol/server-everything")); err != nil {
		if os.Getenv("MCPBOX_E2E_REQUIRE") == "1" {
			t.Fatalf("npm peers missing (run: npm ci --prefix test/e2e/node): %v", err)
		}
		t.Log("npm peers not installed: the built-in server only")
		return ""
	}
	return dir
}

// problems are the report's problems but the p99 ratio, which a shared CI
// host's noise decides at this size (the figures are logged).
func problems(r *Report) []string {
	return slices.DeleteFunc(r.Problems(), func(p string) bool { return strings.HasPrefix(p, "p99 under load") })
}

func runLoad(t *testing.T, o Options) *Report {
	t.Helper()
	o.Mcpbox = mcpboxBin
	o.Progress = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Run(ctx, o)
	if r != nil {
		var b strings.Builder
		r.Print(&b)
		t.Logf("report:\n%s", b.String())
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

// TestLoadCalls: 5 sessions of 3 clients × 40 calls, two in flight each,
// alternating the built-in server and server-everything: every call
// answered correctly, every call with exactly one audit record, the chain
// verified, and the gateway's resources sampled.
func TestLoadCalls(t *testing.T) {
	requireBinary(t)
	o := Options{Clients: 3, Sessions: 5, Calls: 40, Concurrency: 2, IdleCalls: 50, SampleEvery: 200 * time.Millisecond}
	if o.NodeModules = nodeModules(t); o.NodeModules != "" {
		o.Server = ServerBoth
	}
	r := runLoad(t, o)
	if ps := problems(r); len(ps) > 0 {
		t.Errorf("problems:\n%s", strings.Join(ps, "\n"))
	}
	if r.Load.OK != 5*40 || r.Load.Sessions != 5 {
		t.Errorf("load: %d sessions, %d calls ok; want 5 and 200", r.Load.Sessions, r.Load.OK)
	}
	// idle 50, its 10 warm-up calls, the load's 200.
	if want := 50 + 10 + 200; r.Audit.Expected != want || r.Audit.CallRecords != want || r.Audit.Outcomes["ok"] != want {
		t.Errorf("audit: %d expected, %d records, outcomes %v; want %d ok", r.Audit.Expected, r.Audit.CallRecords, r.Audit.Outcomes, want)
	}
	if len(r.Samples) == 0 {
		t.Fatal("no resource samples")
	}
	s := r.Samples[len(r.Samples)-1]
	if s.RSS <= 0 || s.FDs <= 0 || s.Goroutines <= 0 || s.Sandboxes < 1 || s.CPU <= 0 {
		t.Errorf("last sample %+v: want the gateway's rss, fds, goroutines (admin stats), cpu and a sandbox", s)
	}
}

// TestLoadChurn: 50 sessions opened, used and closed (scope session, so
// each starts and stops a sandbox): nothing failed or went unaudited, and
// after settling the gateway holds no more sandboxes, cgroups, mounts,
// session dirs, descriptors or goroutines than before (within the Leak
// tolerances).
func TestLoadChurn(t *testing.T) {
	requireBinary(t)
	r := runLoad(t, Options{Scenario: ScenarioChurn, Sessions: 50, Settle: 2 * time.Second, SampleEvery: 200 * time.Millisecond})
	if ps := problems(r); len(ps) > 0 {
		t.Errorf("problems:\n%s", strings.Join(ps, "\n"))
	}
	if r.Before == nil || r.After == nil || r.Load.Sessions != 50 || r.Load.OK != 50 {
		t.Fatalf("churn: before %v, after %v, %d sessions, %d calls ok; want both samples, 50 and 50", r.Before, r.After, r.Load.Sessions, r.Load.OK)
	}
	peak := 0
	for _, s := range r.Samples {
		peak = max(peak, s.Sandboxes)
	}
	if peak < 1 || r.After.Sandboxes != 0 {
		t.Errorf("sandboxes: peak %d, after %d; want scope-session sandboxes that come and go", peak, r.After.Sandboxes)
	}
}

// TestProblems: the checks flag what they must (a checker that cannot
// fail would make the tests above vacuous).
func TestProblems(t *testing.T) {
	clean := func() *Report {
		return &Report{Load: &Phase{Name: "load", Calls: 10, OK: 10, Errors: map[string]int{}},
			Idle:   &Phase{Name: "idle", Errors: map[string]int{}, Latency: Latency{P99: 2}},
			Audit:  Audit{Expected: 10, CallRecords: 10, Verified: true},
			Before: &Sample{RSS: 100 << 20, FDs: 20, Goroutines: 10}, After: &Sample{RSS: 100 << 20, FDs: 20, Goroutines: 10}}
	}
	if ps := clean().Problems(); len(ps) > 0 {
		t.Fatalf("a clean report has problems: %v", ps)
	}
	for _, tc := range []struct {
		name, want string
		spoil      func(r *Report)
	}{
		{"failed call", "calls failed", func(r *Report) { r.Load.Failed, r.Load.Errors["timeout"] = 1, 1 }},
		{"missing record", "without a record", func(r *Report) { r.Audit.Missing = 1 }},
		{"extra record", "extra records", func(r *Report) { r.Audit.Extra = 1 }},
		{"chain", "does not verify", func(r *Report) { r.Audit.Verified = false }},
		{"p99", "p99 under load", func(r *Report) { r.P99Ratio = 10.5 }},
		{"fd leak", "leak: fds", func(r *Report) { r.After.FDs += LeakFDs + 1 }},
		{"goroutine leak", "leak: goroutines", func(r *Report) { r.After.Goroutines += LeakGoroutines + 1 }},
		{"memory", "leak: rss", func(r *Report) { r.After.RSS += LeakRSS + 1 }},
		{"cgroup", "leak: cgroups", func(r *Report) { r.After.Cgroups++ }},
		{"mount", "leak: mounts", func(r *Report) { r.After.Mounts++ }},
		{"sandbox", "leak: sandboxes", func(r *Report) { r.After.Sandboxes++ }},
		{"session dir", "leak: session dirs", func(r *Report) { r.After.SessionDirs++ }},
		{"stop", "gateway stop", func(r *Report) { r.Stop = "exit status 1" }},
	} {
		r := clean()
		tc.spoil(r)
		ps := r.Problems()
		if len(ps) != 1 || !strings.Contains(ps[0], tc.want) {
			t.Errorf("%s: problems %q, want one naming %q", tc.name, ps, tc.want)
		}
	}
}

// TestCompareRecords: a call without its record, and a record twice, are
// counted per session and tool, not hidden by totals that happen to match.
func TestCompareRecords(t *testing.T) {
	a, b := recordKey{"s1", "ws", "read_file"}, recordKey{"s2", "ws", "read_file"}
	exp, missing, extra := compareRecords(map[recordKey]int{a: 2, b: 2}, map[recordKey]int{a: 3, b: 1})
	if exp != 4 || missing != 1 || extra != 1 {
		t.Errorf("got expected %d, missing %d, extra %d; want 4, 1, 1", exp, missing, extra)
	}
}

// TestSummarize checks the percentiles against a known distribution.
func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarize(ds)
	if l.N != 1000 || l.P50 != 500 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 || l.Mean != 500.5 {
		t.Errorf("summarize(1..1000 ms) = %+v", l)
	}
}
