//go:build linux && amd64

package sandbox

import (
	"context"
	"syscall"
	"testing"
)

// TestStartLeavesHostMemoryWritable: the init's clone shares the host's
// address space (vfork_unsafe.go), so a start leaves none of the host's
// pages write-protected. A fork would: the host's next write to each page
// it had written before the start would fault.
func TestStartLeavesHostMemoryWritable(t *testing.T) {
	requireSandbox(t)
	const pages = 2048
	buf := make([]byte, pages*4096)
	touch := func() {
		for i := 0; i < len(buf); i += 4096 {
			buf[i]++
		}
	}
	touch()
	touch() // every page present and written
	res, err := Run(context.Background(), quick("true"), Stdio{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sandbox: %v %+v", err, res)
	}
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	touch()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	// Other goroutines of the test may fault a little meanwhile.
	if faults := after.Minflt - before.Minflt; faults > pages/8 {
		t.Fatalf("writing %d pages after a start took %d page faults: the start write-protected the host's memory", pages, faults)
	}
}
