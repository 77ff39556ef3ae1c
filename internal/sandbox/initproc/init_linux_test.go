package initproc

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/bpf"
)

func TestCloneSourceRefusesSwappedSources(t *testing.T) {
	dir := t.TempDir()
	real := dir + "/real"
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, dir+"/link"); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(real, &st); err != nil {
		t.Fatal(err)
	}
	// The path now leads somewhere else than the file the host vetted.
	b := bindSpec{Source: real, Target: "/data", Dev: st.Dev, Ino: st.Ino + 1}
	if _, err := cloneSource("", b); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("cloneSource of a swapped source: %v, want a refusal", err)
	}
	// A symlink anywhere on the path is refused outright.
	b = bindSpec{Source: dir + "/link", Target: "/data", Dev: st.Dev, Ino: st.Ino}
	if _, err := cloneSource("", b); err == nil || !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("cloneSource through a symlink: %v, want ELOOP", err)
	}
}

func TestPackFilterRoundTrip(t *testing.T) {
	prog := []bpf.RawInstruction{{Op: 0x20, K: 4}, {Op: 0x15, Jt: 1, Jf: 2, K: 0xc000003e}, {Op: 0x6, K: 0x7fff0000}}
	if diff := cmp.Diff(prog, unpackFilter(packFilter(prog))); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}

// With the terminal, the kernel delivers ^C to the workload itself: the
// init must not deliver it again. Without, the init is the only path.
func TestReapForwarding(t *testing.T) {
	for _, tty := range []bool{false, true} {
		child := exec.Command("sleep", "30")
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		sigs := make(chan os.Signal, 2)
		sigs <- syscall.SIGINT
		done := make(chan reaped, 1)
		go func() { code, stopped := reap(child.Process.Pid, sigs, tty); done <- reaped{code, stopped} }()
		select {
		case r := <-done:
			if tty {
				t.Fatalf("tty: the init forwarded a terminal signal (workload exited %d)", r.code)
			}
			if r.code != 128+int(syscall.SIGINT) || !r.stopped {
				t.Fatalf("no tty: workload exited %d, stopped %v; want 130, true", r.code, r.stopped)
			}
		case <-time.After(500 * time.Millisecond):
			if !tty {
				t.Fatal("no tty: SIGINT was not forwarded")
			}
			sigs <- syscall.SIGTERM // not a terminal signal: forwarded either way
			if r := <-done; r.code != 128+int(syscall.SIGTERM) || !r.stopped {
				t.Fatalf("tty: SIGTERM not forwarded (exit %d, stopped %v)", r.code, r.stopped)
			}
		}
	}
}

type reaped struct {
	code    int
	stopped bool
}

// A workload that ends by itself was not stopped, even if it was passed
// a signal that does not ask it to end.
func TestReapNotStopped(t *testing.T) {
	// SIGWINCH is forwarded and ignored by default: no trap to race with.
	child := exec.Command("sh", "-c", "sleep 0.3; exit 3")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGWINCH
	code, stopped := reap(child.Process.Pid, sigs, false)
	if code != 3 || stopped {
		t.Fatalf("exit %d, stopped %v; want 3, false", code, stopped)
	}
}
