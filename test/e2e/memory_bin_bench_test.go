package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkIdleMemoryBinaries measures the memory of sandboxes as a user
// runs them: `mcpbox exec` of the built binaries, not this test binary as
// the init. MCPBOX_BENCH_BIN names a directory holding mcpbox and
// mcpbox-init built together with -buildvcs=true from a clean checkout
// (scripts/bench-density.sh builds them), so that mcpbox starts the lean
// init. The baseline, measured in the same run, is the same mcpbox alone
// in another directory, which re-executes itself as the init. Each
// variant starts idleN idle test MCP servers side by side (stdin held
// open), then freezes their cgroups, and reports the USS and PSS of the
// helpers (the inits) per sandbox and the ratios lean/baseline.
//
//	MCPBOX_BENCH_BIN=DIR go test ./test/e2e -run '^$' -bench IdleMemoryBinaries -benchtime 1x
func BenchmarkIdleMemoryBinaries(b *testing.B) {
	dir := os.Getenv("MCPBOX_BENCH_BIN")
	if dir == "" {
		b.Skip("MCPBOX_BENCH_BIN: a directory with mcpbox and mcpbox-init of one -buildvcs=true build")
	}
	lean := filepath.Join(dir, "mcpbox")
	if _, err := os.Stat(filepath.Join(dir, "mcpbox-init")); err != nil {
		b.Fatalf("MCPBOX_BENCH_BIN: %v", err)
	}
	alone := filepath.Join(b.TempDir(), "mcpbox")
	copyExec(b, lean, alone)
	server := goBuild(b, gwServerPkg)
	n := idleN(b)
	var res [2]binMem
	for i, bin := range []string{alone, lean} {
		res[i] = measureBinary(b, bin, server, n, i == 1)
	}
	for b.Loop() {
	}
	base, l := res[0], res[1]
	k := float64(n)
	b.ReportMetric(k, "sandboxes")
	b.ReportMetric(l.idle.uss/k, "lean-idle-USS-MiB/sandbox")
	b.ReportMetric(l.idle.pss/k, "lean-idle-PSS-MiB/sandbox")
	b.ReportMetric(l.paused.uss/k, "lean-paused-USS-MiB/sandbox")
	b.ReportMetric(l.paused.pss/k, "lean-paused-PSS-MiB/sandbox")
	b.ReportMetric(base.idle.uss/k, "base-idle-USS-MiB/sandbox")
	b.ReportMetric(base.idle.pss/k, "base-idle-PSS-MiB/sandbox")
	b.ReportMetric(l.idle.uss/base.idle.uss, "idle-USS-ratio")
	b.ReportMetric(l.paused.pss/base.paused.pss, "paused-PSS-ratio")
	b.ReportMetric(l.total/k, "lean-paused-total-PSS-MiB/sandbox")
	for i, name := range []string{"baseline (mcpbox re-executed)", "lean (mcpbox-init)"} {
		r := res[i]
		b.Logf("%s, %d sandboxes: inits idle USS %.1f PSS %.1f MiB, paused USS %.1f PSS %.1f MiB, %.1f threads/init; workloads PSS %.1f MiB; all paused with workloads: PSS %.1f MiB",
			name, n, r.idle.uss, r.idle.pss, r.paused.uss, r.paused.pss, float64(r.threads)/k, r.work.pss, r.total)
	}
}

// binMem is what measureBinary found, in MiB summed over the sandboxes.
type binMem struct {
	idle, paused, work procMem
	total              float64 // all paused: inits and workloads, PSS
	threads            int     // of the inits, idle
}

// measureBinary starts n `bin exec` sandboxes of the test server side by
// side, measures their inits idle and frozen, and ends them.
func measureBinary(b *testing.B, bin, server string, n int, wantLean bool) binMem {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	type run struct {
		cmd  *exec.Cmd
		in   io.WriteCloser
		init int
	}
	var runs []*run
	defer func() {
		for _, r := range runs {
			r.in.Close() // the server reads EOF and exits
		}
		for _, r := range runs {
			done := make(chan struct{})
			go func() { r.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				r.cmd.Process.Kill()
				<-done
			}
		}
	}()
	for range n {
		cmd := exec.CommandContext(ctx, bin, "exec", "--memory", "256Mi", "--pids", "64",
			"--input", server, "--", "/workspace/input/mcpserver")
		in, err := cmd.StdinPipe()
		lcRequire(b, err)
		cmd.Stderr = os.Stderr
		lcRequire(b, cmd.Start())
		runs = append(runs, &run{cmd: cmd, in: in})
	}
	// Ready: each mcpbox has its init, and the init its workload.
	end := time.Now().Add(5 * time.Minute)
	for _, r := range runs {
		for ; ; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				b.Fatalf("%s: sandboxes not up in 5 minutes", bin)
			}
			r.init = initOf(b, r.cmd.Process.Pid)
			if r.init > 0 && len(children(b, r.init)) > 0 {
				break
			}
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", r.init))
		lcRequire(b, err)
		if lean := strings.HasSuffix(exe, "/mcpbox-init"); lean != wantLean {
			b.Fatalf("init of %s runs %s: want the lean init %v", bin, exe, wantLean)
		}
	}
	var m binMem
	measure := func() (h, w procMem) {
		for _, r := range runs {
			h.add(b, r.init)
			for _, c := range children(b, r.init) {
				w.add(b, c)
			}
		}
		return h, w
	}
	settle()
	m.idle, m.work = measure()
	for _, r := range runs {
		m.threads += threadsOf(b, r.init)
	}
	for _, r := range runs {
		freeze(b, r.init, true)
	}
	settle()
	var pw procMem
	m.paused, pw = measure()
	m.total = m.paused.pss + pw.pss
	for _, r := range runs {
		freeze(b, r.init, false)
	}
	return m
}

// initOf is the sandbox init started by the mcpbox process pid, or 0.
func initOf(b *testing.B, pid int) int {
	for _, c := range children(b, pid) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if err == nil && strings.Contains(string(cmdline), "__mcpbox_init__") {
			return c
		}
	}
	return 0
}

// threadsOf is a process's thread count.
func threadsOf(b *testing.B, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	lcRequire(b, err)
	return len(ents)
}

// freeze freezes or thaws the cgroup of pid: the v1 freezer hierarchy if
// the process is in one, else cgroup v2's cgroup.freeze.
func freeze(b *testing.B, pid int, on bool) {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	lcRequire(b, err)
	defer f.Close()
	var file, value, want string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[1] == "freezer":
			file = filepath.Join("/sys/fs/cgroup/freezer", parts[2], "freezer.state")
			value, want = "THAWED", "THAWED"
			if on {
				value, want = "FROZEN", "FROZEN"
			}
		case parts[0] == "0" && file == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], "cgroup.freeze")
			value, want = "0", "0"
			if on {
				value, want = "1", "1"
			}
		}
	}
	if file == "" {
		b.Fatalf("no freezer for pid %d", pid)
	}
	lcRequire(b, os.WriteFile(file, []byte(value), 0))
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := os.ReadFile(file)
		lcRequire(b, err)
		if strings.TrimSpace(string(got)) == want {
			return
		}
		if time.Now().After(end) {
			b.Fatalf("%s: still %q after 10s, want %s", file, got, want)
		}
	}
}

// copyExec copies the executable src to dst.
func copyExec(b *testing.B, src, dst string) {
	data, err := os.ReadFile(src)
	lcRequire(b, err)
	lcRequire(b, os.WriteFile(dst, data, 0o755))
}
