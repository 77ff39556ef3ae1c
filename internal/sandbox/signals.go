package sandbox

import (
	"os"
	"os/signal"
	"syscall"
)

// supervisorSignals are the signals a supervisor passes on to its
// workload: the ones a shell or a service manager sends to stop,
// interrupt or poke a process.
var supervisorSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// SignalForwarder passes the signals this process receives on to a
// sandbox's workload (mcpbox exec): the workload decides what a SIGTERM
// means, and mcpbox exits with its status.
type SignalForwarder struct {
	sigs chan os.Signal
}

// ForwardSignals starts catching supervisorSignals now, before the
// sandbox starts: one that arrives during setup is delivered to the
// workload once To is called, instead of killing this process midway.
// Stop ends the catching.
func ForwardSignals() *SignalForwarder {
	f := &SignalForwarder{sigs: make(chan os.Signal, 8)}
	signal.Notify(f.sigs, supervisorSignals...)
	return f
}

// To delivers every caught signal, those caught so far included, to sb
// (a *Sandbox) until Stop. The order of two different signals that
// arrive close together is not kept: Go's runtime may handle them on
// different threads.
func (f *SignalForwarder) To(sb interface{ Signal(os.Signal) error }) {
	go func() {
		for s := range f.sigs {
			_ = sb.Signal(s)
		}
	}()
}

// Stop stops catching: the signals act on this process again.
func (f *SignalForwarder) Stop() { signal.Stop(f.sigs) }
