package launch

// The backend shape: what runs the instances of one configured server.

import (
	"context"
	"errors"
	"sync"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/gateway"
)

// Backend runs the instances of one server: a sandbox on this host
// (Local) or a remote endpoint (Remote); a group's members share one
// Local (Group). The gateway reaches a backend through gateway.Server's
// Launch (On) and Release.
type Backend interface {
	// Start starts the server for scope. ctx bounds the start (and the
	// secrets it resolves), not the instance, which lives until Stop.
	Start(ctx context.Context, scope gateway.Scope) (Instance, error)
	// Release frees what the backend keeps for scope once the scope is
	// over (a session's workspace); its instances are stopped already.
	Release(scope gateway.Scope)
	// List returns the instances started and not yet ended.
	List() []Instance
}

// Instance is one started server.
type Instance interface {
	// Scope is the scope it serves.
	Scope() gateway.Scope
	// Stop ends it and frees what it holds; it may block until it is gone.
	Stop()
	// Pause and Resume freeze and thaw it; ErrUnsupported if it cannot.
	Pause() error
	Resume() error
	// Stats reads its resource use; ErrUnsupported if it cannot.
	Stats() (cgroup.Stats, error)
	// Process is what the gateway holds of it: its streams or connection,
	// with Stop, Pause and Resume above.
	Process() *gateway.Process
}

// The backends of this package.
var (
	_ Backend = (*Local)(nil)
	_ Backend = (*Remote)(nil)
)

// ErrUnsupported: the backend cannot do that (pause a remote server).
var ErrUnsupported = errors.New("not supported by this server's backend")

// On is gateway.Server.Launch for b: it starts an instance and hands the
// gateway its Process.
func On(b Backend) func(context.Context, gateway.Scope) (*gateway.Process, error) {
	return func(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
		in, err := b.Start(ctx, scope)
		if err != nil {
			return nil, err
		}
		return in.Process(), nil
	}
}

// liveSet is a backend's instances started and not yet ended. A scope may
// have two for a moment (a refresh starts the new before the old ends).
type liveSet struct {
	mu sync.Mutex
	m  map[Instance]struct{} // guarded by mu
}

func (s *liveSet) add(in Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[Instance]struct{}{}
	}
	s.m[in] = struct{}{}
}

func (s *liveSet) remove(in Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, in)
}

func (s *liveSet) list() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.m))
	for in := range s.m {
		out = append(out, in)
	}
	return out
}
