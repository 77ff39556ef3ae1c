package e2e

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/sandbox"
)

// Pausing and resuming sandboxes (the cgroup freezer), driven in-process
// through internal/sandbox, with the test MCP server in each sandbox:
//
//	go test ./test/e2e -run '^$' -bench 'PauseResume|Density' -benchtime 3x
//	MCPBOX_DENSITY_N=200 go test ./test/e2e -run '^$' -bench Density -benchtime 1x -timeout 30m
//
// BenchmarkDensity starts MCPBOX_DENSITY_N sandboxes; unset, 5 when
// -benchtime is a count of at most 3 (the CI smoke run), else 50.

// The benchmarks start sandboxes in this process: the test binary is the
// sandbox init, as mcpbox is (cmd/mcpbox calls sandbox.Main first too).
// Package init runs before TestMain, so the init never builds binaries.
func init() { sandbox.Main() }

// lcTimeout bounds each handshake and ping.
const lcTimeout = 10 * time.Second

// lcServer is the test MCP server in a sandbox of its own, spoken to
// over its stdio as raw JSON-RPC lines (no client library: the density
// figures should hold the servers' memory, not the clients').
type lcServer struct {
	sb   *sandbox.Sandbox
	in   *os.File // the server's stdin, kept open: an idle server
	out  *os.File // the server's stdout
	rd   *bufio.Reader
	next int // the next request id
	wait func() (*sandbox.Result, error)
}

// lcStart starts the test server in a sandbox with memory and pids
// limits (so it has a cgroup) and initializes an MCP session with it. It
// registers the cleanup: Kill, then Wait bounded.
func lcStart(tb testing.TB, ctx context.Context, bin string) (*lcServer, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	spec := sandbox.Spec{
		Args:   []string{"/opt/mcpserver/mcpserver", "-name", "idle"},
		Mounts: []sandbox.Mount{{Source: filepath.Dir(bin), Target: "/opt/mcpserver", Exec: true}},
		Limits: sandbox.Limits{Memory: 256 << 20, Pids: 64},
	}
	sb, err := sandbox.Start(ctx, spec, sandbox.Stdio{Stdin: stdinR, Stdout: stdoutW})
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, err
	}
	s := &lcServer{sb: sb, in: stdinW, out: stdoutR, rd: bufio.NewReader(stdoutR), next: 1, wait: sync.OnceValues(sb.Wait)}
	tb.Cleanup(func() { s.stop(tb) })
	err = s.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	if err == nil {
		_, err = fmt.Fprintln(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	if err != nil {
		return nil, fmt.Errorf("initializing the server in %s: %w", sb.ID, err)
	}
	return s, nil
}

// call sends one request and reads lines until its response.
func (s *lcServer) call(method, params string) error {
	id := s.next
	s.next++
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q`, id, method)
	if params != "" {
		req += `,"params":` + params
	}
	if _, err := fmt.Fprintln(s.in, req+"}"); err != nil {
		return err
	}
	if err := s.out.SetReadDeadline(time.Now().Add(lcTimeout)); err != nil {
		return err
	}
	want := `"id":` + strconv.Itoa(id) + `,`
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the response to %s: %w", method, err)
		}
		if strings.Contains(line, want) {
			if !strings.Contains(line, `"result"`) {
				return fmt.Errorf("%s failed: %s", method, line)
			}
			return nil
		}
	}
}

// stop kills the sandbox and waits for it, bounded.
func (s *lcServer) stop(tb testing.TB) {
	s.sb.Kill()
	done := make(chan error, 1)
	go func() {
		_, err := s.wait()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("sandbox %s: %v", s.sb.ID, err)
		}
	case <-time.After(30 * time.Second):
		tb.Errorf("sandbox %s still running 30s after Kill", s.sb.ID)
	}
	s.in.Close()
	s.out.Close()
}

// lcRequire skips when this host cannot give a sandbox a freezer.
func lcRequire(b *testing.B, err error) {
	b.Helper()
	var se *sandbox.StartError
	switch {
	case err == nil:
	case errors.As(err, &se) && (se.Layer == sandbox.LayerCgroups || se.Layer == sandbox.LayerUserns):
		b.Skipf("sandboxes with cgroups unavailable here: %v", err)
	case errors.Is(err, cgroup.ErrUnsupported):
		b.Skipf("no cgroup freezer here: %v", err)
	default:
		b.Fatal(err)
	}
}

// BenchmarkPauseResume: the latency of Pause and of Resume on a sandbox
// running the idle test server, and of a wake as a client sees it:
// Resume, then a ping answered. Each iteration starts from a server that
// answered a ping (op=pause) or is paused (the others).
func BenchmarkPauseResume(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := lcStart(b, ctx, filepath.Join(goBuild(b, gwServerPkg), "mcpserver"))
	lcRequire(b, err)
	lcRequire(b, s.sb.Pause())
	lcRequire(b, s.sb.Resume())
	ops := []struct {
		name  string
		setup func() error // untimed
		op    func() error // timed
	}{
		{"pause", func() error { return errors.Join(s.sb.Resume(), s.call("ping", "")) }, s.sb.Pause},
		{"resume", func() error { return errors.Join(s.sb.Resume(), s.call("ping", ""), s.sb.Pause()) }, s.sb.Resume},
		{"wake", func() error { return errors.Join(s.sb.Resume(), s.call("ping", ""), s.sb.Pause()) },
			func() error { return errors.Join(s.sb.Resume(), s.call("ping", "")) }},
	}
	for _, o := range ops {
		b.Run("op="+o.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := o.setup(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := o.op(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			gwReportLatency(b, lat)
		})
	}
	if err := s.sb.Resume(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDensity starts N idle test servers, each in its own sandbox,
// and reports the memory each adds running and paused: from the host's
// MemAvailable (everything: the sandbox's processes, kernel objects, the
// page cache they pull in) and from the sum of the sandboxes' cgroup
// memory charge. Each iteration pauses all of them and resumes them;
// ns/op is both. The figures after the loop are with all paused.
func BenchmarkDensity(b *testing.B) {
	n := densityN(b)
	bin := filepath.Join(goBuild(b, gwServerPkg), "mcpserver")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	before := memAvailable(b)
	servers := startMany(b, ctx, bin, n)
	running := memAvailable(b)
	runningCg := cgroupSum(b, servers)
	var pauseAll, resumeAll time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		eachServer(b, servers, (*sandbox.Sandbox).Pause)
		pauseAll += time.Since(start)
		start = time.Now()
		eachServer(b, servers, (*sandbox.Sandbox).Resume)
		resumeAll += time.Since(start)
	}
	b.StopTimer()
	eachServer(b, servers, (*sandbox.Sandbox).Pause)
	time.Sleep(time.Second) // let the kernel's counters settle
	paused := memAvailable(b)
	pausedCg := cgroupSum(b, servers)
	// A paused server must still answer once woken.
	eachServer(b, servers, (*sandbox.Sandbox).Resume)
	for _, s := range servers {
		if err := s.call("ping", ""); err != nil {
			b.Fatalf("%s after Resume: %v", s.sb.ID, err)
		}
	}
	k := float64(len(servers))
	b.ReportMetric(k, "sandboxes")
	b.ReportMetric(mib(before-running)/k, "MiB/sandbox-running")
	b.ReportMetric(mib(before-paused)/k, "MiB/sandbox-paused")
	b.ReportMetric(mib(int64(runningCg))/k, "cgroup-MiB/sandbox-running")
	b.ReportMetric(mib(int64(pausedCg))/k, "cgroup-MiB/sandbox-paused")
	b.ReportMetric(pauseAll.Seconds()*1000/float64(b.N), "pause-all-ms")
	b.ReportMetric(resumeAll.Seconds()*1000/float64(b.N), "resume-all-ms")
}

// densityN is how many sandboxes BenchmarkDensity starts.
func densityN(b *testing.B) int {
	if v := os.Getenv("MCPBOX_DENSITY_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("MCPBOX_DENSITY_N=%q: want a positive count", v)
		}
		return n
	}
	if f := flag.Lookup("test.benchtime"); f != nil {
		if c, ok := strings.CutSuffix(f.Value.String(), "x"); ok {
			if k, err := strconv.Atoi(c); err == nil && k <= 3 {
				return 5
			}
		}
	}
	return 50
}

// densityFloor is the MemAvailable below which startMany stops starting
// sandboxes rather than push the host into reclaim.
const densityFloor = 2 << 30

// startMany starts up to n servers, a few at a time; it stops early,
// with what it has, when ctx ends or memory runs low.
func startMany(b *testing.B, ctx context.Context, bin string, n int) []*lcServer {
	var (
		mu      sync.Mutex
		servers []*lcServer
		errs    []error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, 2*runtime.NumCPU())
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if i%10 == 0 && memAvailable(b) < densityFloor {
			b.Logf("stopping at %d sandboxes: MemAvailable below %d MiB", i, densityFloor>>20)
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := lcStart(b, ctx, bin)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			servers = append(servers, s)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		if len(servers) == 0 {
			lcRequire(b, errs[0])
		}
		b.Fatalf("%d of %d sandboxes failed to start; first: %v", len(errs), n, errs[0])
	}
	if len(servers) < n {
		b.Logf("started %d of %d sandboxes within the time bound", len(servers), n)
	}
	lcRequire(b, servers[0].sb.Pause())
	lcRequire(b, servers[0].sb.Resume())
	return servers
}

// eachServer applies f to every server's sandbox.
func eachServer(b *testing.B, servers []*lcServer, f func(*sandbox.Sandbox) error) {
	for _, s := range servers {
		if err := f(s.sb); err != nil {
			b.Fatal(err)
		}
	}
}

// cgroupSum adds up the sandboxes' current memory charge.
func cgroupSum(b *testing.B, servers []*lcServer) uint64 {
	var sum uint64
	for _, s := range servers {
		st, err := s.sb.Stats()
		if err != nil {
			b.Fatal(err)
		}
		sum += st.MemoryCurrent
	}
	return sum
}

// memAvailable returns the host's MemAvailable in bytes, after this
// process gave back what it can, so that its own heap moves the figure
// as little as possible.
func memAvailable(b *testing.B) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	f := statusField(string(data), "MemAvailable:")
	if len(f) == 0 {
		b.Fatal("no MemAvailable in /proc/meminfo")
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return kb << 10
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// BenchmarkWake: the latency of waking a paused sandbox as its client
// sees it (Resume, then a ping answered) against a ping to the same
// server running, measured in turn in each iteration.
//
//	go test ./test/e2e -run '^$' -bench Wake -benchtime 200x
func BenchmarkWake(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := lcStart(b, ctx, filepath.Join(goBuild(b, gwServerPkg), "mcpserver"))
	lcRequire(b, err)
	lcRequire(b, s.sb.Pause())
	lcRequire(b, s.sb.Resume())
	var running, woken []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := s.call("ping", ""); err != nil {
			b.Fatal(err)
		}
		running = append(running, time.Since(start))
		b.StopTimer()
		if err := s.sb.Pause(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start = time.Now()
		if err := errors.Join(s.sb.Resume(), s.call("ping", "")); err != nil {
			b.Fatal(err)
		}
		woken = append(woken, time.Since(start))
	}
	b.StopTimer()
	p := func(lat []time.Duration, pct int) float64 {
		slices.Sort(lat)
		return float64(lat[min(len(lat)*pct/100, len(lat)-1)]) / float64(time.Microsecond)
	}
	b.ReportMetric(p(woken, 50), "wake-p50-µs")
	b.ReportMetric(p(woken, 99), "wake-p99-µs")
	b.ReportMetric(p(running, 50), "running-p50-µs")
	b.ReportMetric(p(woken, 50)/p(running, 50), "ratio")
}
