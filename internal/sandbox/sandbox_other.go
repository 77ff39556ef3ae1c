//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"os"

	"mcpbox/internal/cgroup"
)

// ErrUnsupported is returned on systems without Linux namespaces.
var ErrUnsupported = ErrNeedsLinux

// Main does nothing outside Linux.
func Main() {}

// Sandbox is one running sandbox.
type Sandbox struct {
	ID       string
	Degraded []Layer
	Prepared bool
}

// Start fails outside Linux (LocalSupported).
func Start(context.Context, Spec, Stdio) (*Sandbox, error) {
	return nil, Local()
}

// Run fails outside Linux.
func Run(ctx context.Context, s Spec, io Stdio) (*Result, error) {
	_, err := Start(ctx, s, io)
	return nil, err
}

// Wait is never reached outside Linux.
func (sb *Sandbox) Wait() (*Result, error) { return nil, ErrUnsupported }

// Signal is never reached outside Linux.
func (sb *Sandbox) Signal(os.Signal) error { return ErrUnsupported }

// Kill is never reached outside Linux.
func (sb *Sandbox) Kill() {}

// errNoFreezer wraps both sentinels: callers test for
// cgroup.ErrUnsupported on every system.
var errNoFreezer = fmt.Errorf("%w: %w", ErrUnsupported, cgroup.ErrUnsupported)

// Pause is never reached outside Linux.
func (sb *Sandbox) Pause() error { return errNoFreezer }

// Resume is never reached outside Linux.
func (sb *Sandbox) Resume() error { return errNoFreezer }

// ResumeToStop does nothing outside Linux: nothing is paused.
func (sb *Sandbox) ResumeToStop() error { return nil }

// Paused reports false outside Linux.
func (sb *Sandbox) Paused() bool { return false }

// Stats is never reached outside Linux.
func (sb *Sandbox) Stats() (cgroup.Stats, error) { return cgroup.Stats{}, errNoFreezer }

// NetTries: only Linux counts them.
func (sb *Sandbox) NetTries() (queries, noRoute uint64, ok bool) { return 0, 0, false }

// Doctor reports that nothing is available.
func Doctor() []Check {
	return []Check{{Name: "linux", Required: true, Layer: LayerUserns, Detail: ErrUnsupported.Error(),
		Degrades: "the local backend runs on Linux only; check a cluster with mcpbox doctor --backend kubernetes --config FILE"}}
}

// Prepared is never made outside Linux.
type Prepared struct{}

// Prepare fails outside Linux (LocalSupported).
func Prepare(context.Context, Spec) (*Prepared, error) {
	return nil, Local()
}

// Matches is never reached outside Linux.
func (p *Prepared) Matches(Spec) bool { return false }

// ID is never reached outside Linux.
func (p *Prepared) ID() string { return "" }

// Start is never reached outside Linux.
func (p *Prepared) Start(context.Context, Spec, Stdio) (*Sandbox, error) {
	return nil, Local()
}

func (p *Prepared) start(ctx context.Context, spec Spec, _ string, stdio Stdio) (*Sandbox, error) {
	return p.Start(ctx, spec, stdio)
}

// Close is never reached outside Linux.
func (p *Prepared) Close() {}

func (p *Prepared) alive() bool { return false }

func warmKey(Spec) string { return "" }
