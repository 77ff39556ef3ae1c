package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/sandbox"
)

// The memory a sandbox costs beyond its workload: the private (USS) and
// proportional (PSS) memory of its helper processes, from
// /proc/PID/smaps_rollup (issue 19: ≤ 1.5 MiB USS per sandbox, 20 side by
// side), idle and paused, and of the gateway per instance.
//
//	go test ./test/e2e -run '^$' -bench IdleMemory -benchtime 1x -count 3
//	MCPBOX_IDLE_N=200 go test ./test/e2e -run '^$' -bench 'IdleMemory/sandbox' -benchtime 1x -timeout 30m

// idleN is how many sandboxes BenchmarkIdleMemory starts side by side.
func idleN(b *testing.B) int {
	if v := os.Getenv("MCPBOX_IDLE_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("MCPBOX_IDLE_N=%q: want a positive count", v)
		}
		return n
	}
	return 20
}

// BenchmarkIdleMemory: sandbox starts idleN idle test servers, each in
// its own sandbox, and reports what their helpers (the sandbox inits, and
// this process's thaw guard shared by all) hold, running and paused; the
// workloads' own memory is reported apart. gateway starts `mcpbox run`
// instances of the test server side by side and reports each one's
// memory (the gateway without its sandbox).
func BenchmarkIdleMemory(b *testing.B) {
	b.Run("sandbox", func(b *testing.B) {
		n := idleN(b)
		bin := filepath.Join(goBuild(b, gwServerPkg), "mcpserver")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		servers := startMany(b, ctx, bin, n)
		k := float64(len(servers))
		for b.Loop() {
			eachServer(b, servers, (*sandbox.Sandbox).Pause)
			eachServer(b, servers, (*sandbox.Sandbox).Resume)
		}
		settle()
		idle, work := helperMemory(b)
		eachServer(b, servers, (*sandbox.Sandbox).Pause)
		settle()
		paused, pwork := helperMemory(b)
		total := memTotal(b)
		eachServer(b, servers, (*sandbox.Sandbox).Resume)
		for _, s := range servers {
			if err := s.call("ping", ""); err != nil {
				b.Fatalf("%s after Resume: %v", s.sb.ID, err)
			}
		}
		b.ReportMetric(k, "sandboxes")
		b.ReportMetric(idle.uss/k, "idle-USS-MiB/sandbox")
		b.ReportMetric(idle.pss/k, "idle-PSS-MiB/sandbox")
		b.ReportMetric(paused.uss/k, "paused-USS-MiB/sandbox")
		b.ReportMetric(paused.pss/k, "paused-PSS-MiB/sandbox")
		b.ReportMetric(work.pss/k, "workload-PSS-MiB/sandbox")
		b.Logf("%d sandboxes: helpers idle USS %.1f MiB PSS %.1f MiB (%d processes), paused USS %.1f PSS %.1f; workloads PSS %.1f (paused %.1f); all paused, with their workloads: PSS %.1f MiB",
			len(servers), idle.uss, idle.pss, idle.procs, paused.uss, paused.pss, work.pss, pwork.pss, total)
	})
	// What a warm pool holds per prepared sandbox (sandbox.warm_pool):
	// the init with the root built, and the workload's process forked
	// ahead, without its command.
	b.Run("prepared", func(b *testing.B) {
		n := idleN(b)
		spec := sandbox.Spec{Args: []string{"/bin/true"}, Limits: sandbox.Limits{Memory: 256 << 20, Pids: 64}}
		pool := sandbox.NewPool(spec, n)
		defer pool.Close()
		for end := time.Now().Add(5 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
			k, err := pool.Ready()
			lcRequire(b, err)
			if k == n {
				break
			}
			if time.Now().After(end) {
				b.Fatalf("%d of %d sandboxes prepared in 5 minutes", k, n)
			}
		}
		for b.Loop() {
		}
		settle()
		// The init and the workload's process, forked and walled ahead,
		// waiting for its command.
		m, w := helperMemory(b)
		if w.procs != n {
			b.Fatalf("%d workload processes waiting in %d prepared sandboxes", w.procs, n)
		}
		b.ReportMetric((m.uss+w.uss)/float64(n), "USS-MiB/prepared")
		b.ReportMetric((m.pss+w.pss)/float64(n), "PSS-MiB/prepared")
		b.ReportMetric(w.uss/float64(n), "forked-USS-MiB/prepared")
	})
	b.Run("gateway", func(b *testing.B) {
		const n = 5
		var pids []int
		for range n {
			sess, _, cmd := gwRunCmd(b, gwBenchMode(), nil, gwLegacy)
			gwMustCall(b, sess, "echo", map[string]any{"text": "warm"}, "warm")
			pids = append(pids, cmd.Process.Pid)
		}
		for b.Loop() {
		}
		settle()
		var sum procMem
		for _, pid := range pids {
			sum.add(b, pid)
		}
		b.ReportMetric(sum.uss/n, "USS-MiB/instance")
		b.ReportMetric(sum.pss/n, "PSS-MiB/instance")
	})
}

// settle lets the processes finish what a call or a pause started.
func settle() { time.Sleep(time.Second) }

// procMem sums smaps_rollup figures, in MiB.
type procMem struct {
	uss, pss float64
	procs    int
}

// add adds one process's private (Private_Clean + Private_Dirty) and
// proportional set.
func (m *procMem) add(tb testing.TB, pid int) {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		tb.Fatal(err)
	}
	kib := func(key string) float64 {
		f := statusField(string(data), key)
		if len(f) == 0 {
			tb.Fatalf("no %s in /proc/%d/smaps_rollup", key, pid)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			tb.Fatal(err)
		}
		return v / 1024
	}
	m.uss += kib("Private_Clean:") + kib("Private_Dirty:")
	m.pss += kib("Pss:")
	m.procs++
}

// helperMemory sums the memory of this process's sandbox helpers (its
// children that are sandbox inits or the thaw guard) and, apart, of the
// workloads (the inits' children).
func helperMemory(b *testing.B) (helpers, workloads procMem) {
	for _, pid := range children(b, os.Getpid()) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(string(cmdline), "__mcpbox_") {
			continue // a test server run directly, a go build
		}
		helpers.add(b, pid)
		for _, w := range children(b, pid) {
			workloads.add(b, w)
		}
	}
	return helpers, workloads
}

// children lists a process's child processes.
func children(b *testing.B, pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue // the thread ended
		}
		for _, f := range strings.Fields(string(data)) {
			c, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, c)
		}
	}
	return out
}

// memTotal is the PSS of this process's whole tree of sandboxes, in MiB.
func memTotal(b *testing.B) float64 {
	h, w := helperMemory(b)
	return h.pss + w.pss
}
