package sandbox

import (
	"context"
	"io"
	"os"
	"testing"
	"time"
)

// TestClosedStdoutReachesTheReader: a workload that closes its stdout and
// keeps running must give its reader EOF, as it would outside a sandbox;
// a stdio server that does this is then seen to have ended instead of
// hanging every call made to it. The sandbox's init must not hold on to
// copies of the workload's stdio.
func TestClosedStdoutReachesTheReader(t *testing.T) {
	requireSandbox(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sb, err := Start(ctx, quick("sh", "-c", "echo before; exec >&-; sleep 30"), Stdio{Stdout: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_, _ = sb.Wait()
	}()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	select {
	case s := <-got:
		if s != "before\n" {
			t.Errorf("stdout = %q, want %q", s, "before\n")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no EOF on stdout within 10 s of the workload closing it")
	}
}
