package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// BenchmarkStartup is `mcpbox version`, a command that does next to
// nothing, against a trivial Go program built in the same run with the
// same toolchain and flags, the two started in turn in every round so
// that load on the host shifts both alike. What is left is mcpbox's own
// start-up: the loading of a larger binary and the package
// initialisation of everything it links, paid before main by every CLI
// command, `mcpbox exec` included, and twice by an exec whose sandbox
// init is mcpbox itself (issue 19, docs/performance.md).
//
// It reports ms-over-go (wall time over the trivial program's),
// cpu-ms/op and cpu-ms-over-go (user and system time, from wait4), and
// init-ms/op, init-kB/op: the sums of a third run's GODEBUG=inittrace=1
// lines (clock time and bytes allocated by the package initialisers).
//
//	MCPBOX_BENCH_BIN=DIR go test ./test/e2e -run '^$' -bench Startup -count 6
//
// With MCPBOX_BENCH_BIN it measures DIR/mcpbox (an older build, to
// compare), else the binary TestMain built.
func BenchmarkStartup(b *testing.B) {
	bin := mcpboxBin
	if dir := os.Getenv("MCPBOX_BENCH_BIN"); dir != "" {
		bin = filepath.Join(dir, "mcpbox")
	}
	trivial := buildTrivialGo(b)
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			timedRun(b, trivial)
		}
	})
	b.Run("mcpbox", func(b *testing.B) {
		timedRun(b, bin, "version") // warm the page cache
		var own, base, ownCPU, baseCPU time.Duration
		var initMs, initBytes float64
		for b.Loop() {
			w, cpu := timedRun(b, bin, "version")
			b.StopTimer()
			bw, bcpu := timedRun(b, trivial)
			ms, bytes := initTrace(b, bin, "version")
			b.StartTimer()
			own += w
			base += bw
			ownCPU += cpu
			baseCPU += bcpu
			initMs += ms
			initBytes += bytes
		}
		n := float64(b.N)
		b.ReportMetric((own-base).Seconds()*1e3/n, "ms-over-go")
		b.ReportMetric(ownCPU.Seconds()*1e3/n, "cpu-ms/op")
		b.ReportMetric((ownCPU-baseCPU).Seconds()*1e3/n, "cpu-ms-over-go")
		b.ReportMetric(initMs/n, "init-ms/op")
		b.ReportMetric(initBytes/1024/n, "init-kB/op")
	})
}

// buildTrivialGo builds a Go program that prints a line and exits, as
// TestMain builds mcpbox (CGO_ENABLED=0), and returns its path.
func buildTrivialGo(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module trivial\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"trivial\\n\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "trivial")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the trivial program: %v\n%s", err, msg)
	}
	return out
}

// initLine is one line of GODEBUG=inittrace=1.
var initLine = regexp.MustCompile(`(?m)^init \S+ @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes`)

// initTrace runs name with GODEBUG=inittrace=1 and returns the sums of
// its package initialisers' clock time (ms) and allocations (bytes).
func initTrace(b *testing.B, name string, args ...string) (ms, bytes float64) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v: %s", name, err, out)
	}
	lines := initLine.FindAllSubmatch(out, -1)
	if len(lines) == 0 {
		b.Fatalf("%s: no inittrace lines in %s", name, out)
	}
	for _, m := range lines {
		c, _ := strconv.ParseFloat(string(m[1]), 64)
		n, _ := strconv.ParseFloat(string(m[2]), 64)
		ms += c
		bytes += n
	}
	return ms, bytes
}
