package launch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/group"
	"mcpbox/internal/specconv"
	"mcpbox/internal/track"
)

// Group runs the servers of one group (config placement group:NAME) in
// one sandbox per scope, under internal/group's supervisor: each member
// is a gateway server whose Launch is Launch(i).
type Group struct {
	sandbox *Local // launches the supervisor

	mu      sync.Mutex
	running map[gateway.Scope]*groupInstance // guarded by mu
}

type groupInstance struct {
	mux  *group.Mux
	sb   Instance // the supervisor's sandbox
	proc *gateway.Process
	refs int // guarded by the launcher's mu
}

// newGroup builds the group's sandbox from its first server
// (specconv.Group); the members are the servers of the group in file
// order. lo is the supervisor's launcher but for its name, spec and
// secrets.
func newGroup(c *config.Config, name string, members []*config.Server, opts specconv.Options, lo LocalOptions) (*Group, error) {
	spec, err := specconv.Group(c, members, opts)
	if err != nil {
		return nil, err
	}
	for _, s := range members {
		lo.Secrets = append(lo.Secrets, s.Secrets...)
	}
	lo.Name = track.GroupLauncher(name) // ":" is not allowed in server names: no collision
	lo.Spec = spec
	return &Group{sandbox: NewLocal(lo), running: map[gateway.Scope]*groupInstance{}}, nil
}

// Release frees what the group's sandboxes keep for scope (Local.Release),
// for gateway.Server.Release.
func (g *Group) Release(scope gateway.Scope) { g.sandbox.Release(scope) }

// Launch returns the gateway.Server.Launch of member i (Groups.Member).
func (g *Group) Launch(i int) func(context.Context, gateway.Scope) (*gateway.Process, error) {
	return func(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
		// Held while the sandbox starts: the members of a session start
		// together and must find one sandbox, not start one each.
		g.mu.Lock()
		inst := g.running[scope]
		if inst != nil {
			select {
			case <-inst.mux.Done():
				inst = nil // the sandbox is gone: a new one
			default:
			}
		}
		if inst == nil {
			sb, err := g.sandbox.Start(ctx, scope)
			if err != nil {
				g.mu.Unlock()
				return nil, err
			}
			proc := sb.Process()
			inst = &groupInstance{mux: group.NewMux(proc.Stdin, proc.Stdout), sb: sb, proc: proc}
			g.running[scope] = inst
		}
		inst.refs++
		g.mu.Unlock()

		stdin, stdout, err := inst.mux.Start(i)
		if err != nil {
			g.release(scope, inst)
			return nil, err
		}
		// exited waits for the member's exit, which the supervisor reports
		// once it has given the member stopGrace.
		exited := func() (int, bool) { return inst.mux.WaitExit(i, stopGrace+time.Second) }
		var once sync.Once
		return &gateway.Process{
			Stdin: stdin, Stdout: stdout,
			Roots: inst.proc.Roots,
			Stop: func() {
				once.Do(func() {
					stdin.Close()
					exited()
					stdout.Close()
					g.release(scope, inst)
				})
			},
			Describe: func() string {
				if code, ok := exited(); ok {
					return fmt.Sprintf("exited with status %d", code)
				}
				return "its group's sandbox ended"
			},
			Clean: func() bool {
				code, ok := exited()
				return ok && code == 0
			},
		}, nil
	}
}

// Groups makes one launcher per group of a config, on its first member.
type Groups struct {
	c         *config.Config
	opts      specconv.Options
	launchers map[string]*Group
	local     func(first *config.Server) LocalOptions
}

// NewGroups returns the groups of c, whose sandboxes specconv.Group builds
// with opts. local gives the options of a group's supervisor launcher
// from the group's first server; the group sets their Name, Spec and
// Secrets.
func NewGroups(c *config.Config, opts specconv.Options, local func(first *config.Server) LocalOptions) *Groups {
	return &Groups{c: c, opts: opts, launchers: map[string]*Group{}, local: local}
}

// Member returns the launcher of group name and s's index in it.
func (gs *Groups) Member(name string, s *config.Server) (*Group, int, error) {
	var members []*config.Server
	idx := -1
	for _, o := range gs.c.Servers {
		if o.Placement == config.PlacementGroup+name {
			if o == s {
				idx = len(members)
			}
			members = append(members, o)
		}
	}
	if gl := gs.launchers[name]; gl != nil {
		return gl, idx, nil
	}
	gl, err := newGroup(gs.c, name, members, gs.opts, gs.local(members[0]))
	if err != nil {
		return nil, 0, fmt.Errorf("group %s: %w", name, err)
	}
	gs.launchers[name] = gl
	return gl, idx, nil
}

// release drops one member's hold on a group sandbox; the last one out
// stops it.
func (g *Group) release(scope gateway.Scope, inst *groupInstance) {
	g.mu.Lock()
	inst.refs--
	last := inst.refs == 0
	if last && g.running[scope] == inst {
		delete(g.running, scope)
	}
	g.mu.Unlock()
	if last {
		inst.mux.Close()
		inst.sb.Stop()
	}
}
