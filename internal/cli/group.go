package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/group"
	"mcpbox/internal/specconv"
	"mcpbox/internal/track"
)

// groupMain is the hidden `mcpbox __group` command: the supervisor inside
// a group's sandbox, its members in $MCPBOX_GROUP_MEMBERS.
func (e *env) groupMain(args []string) int {
	raw := os.Getenv(specconv.GroupMembersEnv)
	if len(args) != 0 || raw == "" {
		e.errorf("__group: want no arguments and the members in $%s", specconv.GroupMembersEnv)
		return exitUsage
	}
	os.Unsetenv(specconv.GroupMembersEnv) // not for the members
	var members []group.Member
	if err := json.Unmarshal([]byte(raw), &members); err != nil {
		e.errorf("__group: %v", err)
		return exitUsage
	}
	if err := group.Supervise(members, e.stdin, e.stdout, e.stderr); err != nil {
		e.errorf("__group: %v", err)
		return 1
	}
	return 0
}

// groupLauncher runs the servers of one group in one sandbox per scope.
type groupLauncher struct {
	sandbox *sandboxLauncher // launches the supervisor

	mu      sync.Mutex
	running map[gateway.Scope]*groupInstance // guarded by mu
}

type groupInstance struct {
	mux  *group.Mux
	sb   backendInstance // the supervisor's sandbox
	proc *gateway.Process
	refs int // guarded by the launcher's mu
}

// newGroupLauncher builds the group's sandbox from its first server
// (specconv.Group); the members are the servers of the group in file
// order.
func newGroupLauncher(c *config.Config, name string, members []*config.Server, opts specconv.Options, l *sandboxLauncher) (*groupLauncher, error) {
	spec, err := specconv.Group(c, members, opts)
	if err != nil {
		return nil, err
	}
	for _, s := range members {
		l.secrets = append(l.secrets, s.Secrets...)
	}
	l.name = track.GroupLauncher(name) // ":" is not allowed in server names: no collision
	l.base = spec
	return &groupLauncher{sandbox: l, running: map[gateway.Scope]*groupInstance{}}, nil
}

// member returns the Launch function of member i.
func (g *groupLauncher) member(i int) func(context.Context, gateway.Scope) (*gateway.Process, error) {
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
			proc := sb.process()
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

// groupSet makes one launcher per group, on its first member.
type groupSet struct {
	c           *config.Config
	opts        specconv.Options
	launchers   map[string]*groupLauncher
	newLauncher func(first *config.Server) *sandboxLauncher
}

// member returns the launcher of group name and s's index in it.
func (gs *groupSet) member(name string, s *config.Server) (*groupLauncher, int, error) {
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
	gl, err := newGroupLauncher(gs.c, name, members, gs.opts, gs.newLauncher(members[0]))
	if err != nil {
		return nil, 0, fmt.Errorf("group %s: %w", name, err)
	}
	gs.launchers[name] = gl
	return gl, idx, nil
}

// release drops one member's hold on a group sandbox; the last one out
// stops it.
func (g *groupLauncher) release(scope gateway.Scope, inst *groupInstance) {
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
