package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeServerFaults: under one `mcpbox serve`, servers that
// crash-loop, die at start, hang in a call, flood stdout with invalid
// JSON and 4 and 32 MiB lines, and close stdout while they keep running. Meanwhile a client keeps calling a healthy server: every one of
// its calls must succeed within a bounded latency, the gateway's resident
// memory must stay bounded, each fault must come back to its caller as an
// error naming its server, and the gateway's log must name each server.
func TestServeServerFaults(t *testing.T) {
	m := modes(t)[0]
	bin := goBuild(t, gwServerPkg)
	mcpserver := func(name string) map[string]any {
		return map[string]any{
			"command": []string{"/opt/bin/mcpserver", "-name", name},
			"filesystem": map[string]any{
				"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
			},
			"tools": map[string]any{"allow": []string{"*"}},
		}
	}
	dead := mcpserver("dead")
	dead["command"] = []string{"/bin/sh", "-c", "echo 'dead: dying at start' >&2; exit 3"}
	crashy := mcpserver("crashy")
	crashy["lifecycle"] = map[string]any{"restart": "on-failure"}
	hang := mcpserver("hang")
	hang["limits"] = map[string]any{"call_timeout": "2s"}
	cfg := hsWriteConfig(t, m, gwDir(t, m), map[string]any{
		"good": mcpserver("good"), "crashy": crashy, "dead": dead, "hang": hang,
		"flood": mcpserver("flood"), "closer": mcpserver("closer"),
	})
	g := gwServe(t, m, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	t.Logf("the first session started its servers in %v", time.Since(start))
	gwMustCall(t, sess, "good__whoami", nil, "good")
	rss := newRSSSampler(t, g.cmd.Process.Pid)
	idle := rss.peak()

	// The healthy server, called without pause by a second client
	// session while the faults run.
	probe := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	var lat []time.Duration
	var probeErrs []string
	stop := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			want := fmt.Sprintf("probe %d", i)
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			start := time.Now()
			got, err := gwCall(cctx, probe, "good__echo", map[string]any{"text": want})
			ccancel()
			lat = append(lat, time.Since(start))
			if err != nil || got != want {
				probeErrs = append(probeErrs, fmt.Sprintf("%s: %q, %v", want, got, err))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// faultCall calls tool and wants an error naming server within limit.
	faultCall := func(t *testing.T, server, tool string, args map[string]any, limit time.Duration) {
		cctx, ccancel := context.WithTimeout(ctx, limit+10*time.Second)
		defer ccancel()
		start := time.Now()
		got, err := gwCall(cctx, sess, server+"__"+tool, args)
		d := time.Since(start)
		switch {
		case err == nil:
			t.Errorf("%s__%s returned %q, want an error", server, tool, got)
		case d > limit:
			t.Errorf("%s__%s failed after %v, want within %v: %v", server, tool, d, limit, err)
		case !strings.Contains(err.Error(), server):
			t.Errorf("%s__%s failed with %q, which does not name the server", server, tool, err)
		}
		t.Logf("%s__%s failed after %v: %v", server, tool, d.Round(time.Millisecond), err)
	}
	var wg sync.WaitGroup
	run := func(name string, f func(t *testing.T)) {
		wg.Add(1)
		go func() { defer wg.Done(); t.Run(name, f) }()
	}
	run("crash loop", func(t *testing.T) {
		// Every call kills it; the gateway starts it again, with a
		// growing delay (a call meanwhile is refused and says how long
		// to wait), until it gives up on it.
		for attempt := 0; ; attempt++ {
			if attempt == 40 {
				t.Fatalf("the gateway still restarts a server after %d calls that crash it", attempt)
			}
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			start := time.Now()
			_, err := gwCall(cctx, sess, "crashy__crash", nil)
			ccancel()
			switch {
			case err == nil:
				t.Fatal("crashy__crash returned a result, want an error")
			case !strings.Contains(err.Error(), "crashy"):
				t.Fatalf("crashy__crash failed with %q, which does not name the server", err)
			case strings.Contains(err.Error(), "giving up"):
				t.Logf("after %d calls: %v", attempt+1, err)
				return
			}
			t.Logf("crashy__crash failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if _, wait, ok := strings.Cut(err.Error(), "try again in "); ok {
				d, perr := time.ParseDuration(strings.Fields(wait)[0])
				if perr != nil || d > 10*time.Second {
					t.Fatalf("refusal %q: want a short delay to wait", err)
				}
				time.Sleep(d) // it restarts after that long
			}
		}
	})
	run("dead at start", func(t *testing.T) { faultCall(t, "dead", "whoami", nil, 5*time.Second) })
	run("hang", func(t *testing.T) {
		faultCall(t, "hang", "hang", nil, 6*time.Second)
		gwMustCall(t, sess, "hang__echo", map[string]any{"text": "after hang"}, "after hang")
	})
	run("flood", func(t *testing.T) {
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		defer ccancel()
		// Lines under the 16 MiB message limit are read whole and refused;
		// longer ones are skipped unread.
		for _, mib := range []int{4, 32} {
			got, err := gwCall(cctx, sess, "flood__flood", map[string]any{"ms": 2000, "mib": mib})
			if err != nil || !strings.HasPrefix(got, "flooded ") {
				t.Fatalf("flood with %d MiB lines: %q, %v; want its result after the dropped lines", mib, got, err)
			}
			t.Logf("flood with %d MiB lines: %s", mib, got)
		}
		gwMustCall(t, sess, "flood__echo", map[string]any{"text": "after flood"}, "after flood")
	})
	run("closes stdout", func(t *testing.T) {
		faultCall(t, "closer", "close_stdout", nil, 10*time.Second)
		// Its process, still running, is ended with its sandbox.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			left := slices.DeleteFunc(crashDescendants(g.cmd.Process.Pid), func(p crashProc) bool {
				return !strings.Contains(p.cmd, "-name closer")
			})
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server that closed its stdout still runs 10 s later: %v", left)
			}
		}
	})
	wg.Wait()
	close(stop)
	<-probed
	peak := rss.stop()

	if len(probeErrs) > 0 {
		t.Errorf("%d of %d calls to the healthy server failed during the faults: %v", len(probeErrs), len(lat), probeErrs)
	}
	slices.Sort(lat)
	if len(lat) < 10 {
		t.Fatalf("only %d calls to the healthy server during the faults", len(lat))
	}
	p50, p99, worst := lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	t.Logf("healthy server during the faults: %d calls, p50 %v, p99 %v, max %v", len(lat), p50, p99, worst)
	t.Logf("gateway RSS: %d MiB before the faults, peak %d MiB", idle>>20, peak>>20)
	if worst > 2*time.Second {
		t.Errorf("a call to the healthy server took %v during the faults, want < 2 s", worst)
	}
	if peak-idle > faultRSSBound {
		t.Errorf("gateway RSS grew by %d MiB during the faults, want < %d MiB", (peak-idle)>>20, faultRSSBound>>20)
	}
	logs := g.logs.String()
	for _, want := range []string{"server=crashy", "server=dead", "server=hang", "server=flood", "server=closer"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the gateway's log never names %s", want)
		}
	}
	gwMustCall(t, sess, "good__echo", map[string]any{"text": "after the faults"}, "after the faults")
}

// faultRSSBound is how much the gateway may grow while servers misbehave:
// a few of the largest messages it reads (16 MiB) in flight, and the
// garbage collector's lag, which the gateway's GOGC of 400 (gatewayGC)
// makes up to four times the live heap, and more while other tests load
// the machine (a CI run measured 280 MiB, runs alone 120-190 MiB); not
// the gigabytes the servers write.
const faultRSSBound = 384 << 20

// rssSampler records the peak resident memory of a process every 50 ms.
type rssSampler struct {
	pid  int
	mu   sync.Mutex
	max  int64 // guarded by mu
	done chan struct{}
	quit chan struct{}
}

func newRSSSampler(t *testing.T, pid int) *rssSampler {
	t.Helper()
	s := &rssSampler{pid: pid, done: make(chan struct{}), quit: make(chan struct{})}
	if _, err := readRSS(pid); err != nil {
		t.Fatalf("reading the RSS of %d: %v", pid, err)
	}
	s.sample()
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.quit:
				return
			case <-time.After(50 * time.Millisecond):
				s.sample()
			}
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *rssSampler) sample() {
	if n, err := readRSS(s.pid); err == nil {
		s.mu.Lock()
		s.max = max(s.max, n)
		s.mu.Unlock()
	}
}

func (s *rssSampler) peak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// stop ends the sampling and returns the peak.
func (s *rssSampler) stop() int64 {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
	s.sample()
	return s.peak()
}

// readRSS reads VmRSS of pid, in bytes.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
