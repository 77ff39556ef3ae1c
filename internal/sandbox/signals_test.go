package sandbox

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// signalTarget records the signals it is sent.
type signalTarget chan os.Signal

func (t signalTarget) Signal(s os.Signal) error { t <- s; return nil }

// TestForwardSignals: a signal caught before the sandbox runs reaches it
// once it does, and so do the later ones; this process survives them.
func TestForwardSignals(t *testing.T) {
	f := ForwardSignals()
	defer f.Stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	target := make(signalTarget, 8)
	f.To(target)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Both arrive; their order is not promised: a signal a process sends
	// itself may be handled on another thread, after a later one.
	want := map[os.Signal]bool{syscall.SIGUSR1: true, syscall.SIGTERM: true}
	for range len(want) {
		select {
		case got := <-target:
			if !want[got] {
				t.Errorf("forwarded %v, want one of SIGUSR1, SIGTERM once each", got)
			}
			delete(want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("%v not forwarded", want)
		}
	}
}
