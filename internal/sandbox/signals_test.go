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
	for _, want := range []os.Signal{syscall.SIGUSR1, syscall.SIGTERM} {
		select {
		case got := <-target:
			if got != want {
				t.Errorf("forwarded %v, want %v", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%v was not forwarded", want)
		}
	}
}
