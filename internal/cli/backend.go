package cli

// The backend shape: what runs the instances of one configured server.
// This file moves as a block to internal/launch.

import (
	"context"
	"errors"
	"sync"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/gateway"
)

// backend runs the instances of one server: a sandbox on this host
// (sandboxLauncher) or a remote endpoint (remoteLauncher); a group's
// members share one sandboxLauncher (groupLauncher). The gateway reaches
// a backend through gateway.Server's Launch (launchOn) and Release.
type backend interface {
	// Start starts the server for scope. ctx bounds the start (and the
	// secrets it resolves), not the instance, which lives until Stop.
	Start(ctx context.Context, scope gateway.Scope) (backendInstance, error)
	// Release frees what the backend keeps for scope once the scope is
	// over (a session's workspace); its instances are stopped already.
	Release(scope gateway.Scope)
	// List returns the instances started and not yet ended.
	List() []backendInstance
}

// backendInstance is one started server.
type backendInstance interface {
	// Scope is the scope it serves.
	Scope() gateway.Scope
	// Stop ends it and frees what it holds; it may block until it is gone.
	Stop()
	// Pause and Resume freeze and thaw it; errUnsupported if it cannot.
	Pause() error
	Resume() error
	// Stats reads its resource use; errUnsupported if it cannot.
	Stats() (cgroup.Stats, error)
	// process is what the gateway holds of it: its streams or connection,
	// with Stop, Pause and Resume above.
	process() *gateway.Process
}

// errUnsupported: the backend cannot do that (pause a remote server).
var errUnsupported = errors.New("not supported by this server's backend")

// launchOn is gateway.Server.Launch for b.
func launchOn(b backend) func(context.Context, gateway.Scope) (*gateway.Process, error) {
	return func(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
		in, err := b.Start(ctx, scope)
		if err != nil {
			return nil, err
		}
		return in.process(), nil
	}
}

// liveSet is a backend's instances started and not yet ended. A scope may
// have two for a moment (a refresh starts the new before the old ends).
type liveSet struct {
	mu sync.Mutex
	m  map[backendInstance]struct{} // guarded by mu
}

func (s *liveSet) add(in backendInstance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[backendInstance]struct{}{}
	}
	s.m[in] = struct{}{}
}

func (s *liveSet) remove(in backendInstance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, in)
}

func (s *liveSet) list() []backendInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]backendInstance, 0, len(s.m))
	for in := range s.m {
		out = append(out, in)
	}
	return out
}

// Start starts a sandbox for scope (sandboxLauncher.start).
func (l *sandboxLauncher) Start(ctx context.Context, scope gateway.Scope) (backendInstance, error) {
	in, err := l.start(ctx, scope)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return in, nil
}

// List returns the sandboxes running.
func (l *sandboxLauncher) List() []backendInstance { return l.live.list() }

// Start connects to the remote server (remoteLauncher.connect).
func (l *remoteLauncher) Start(ctx context.Context, scope gateway.Scope) (backendInstance, error) {
	in, err := l.connect(ctx, scope)
	if err != nil {
		return nil, err
	}
	return in, nil
}

// Release keeps nothing: a remote server's state is its own.
func (l *remoteLauncher) Release(gateway.Scope) {}

// List returns the connections open.
func (l *remoteLauncher) List() []backendInstance { return l.live.list() }
