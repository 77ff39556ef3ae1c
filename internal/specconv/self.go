package specconv

// Sandboxes that run mcpbox's own binary: the built-in server and a
// group's supervisor.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"mcpbox/internal/builtin"
	"mcpbox/internal/config"
	"mcpbox/internal/group"
	"mcpbox/internal/sandbox"
)

// selfTarget is where mcpbox's own binary appears in sandboxes that run
// it (the group supervisor, the built-in server).
const selfTarget = "/run/mcpbox/bin/mcpbox"

// GroupMembersEnv carries a group's members (as JSON) to the supervisor,
// the hidden `mcpbox __group` command.
const GroupMembersEnv = "MCPBOX_GROUP_MEMBERS"

// selfMount binds the running mcpbox binary read-only at selfTarget.
func selfMount() (sandbox.Mount, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return sandbox.Mount{}, fmt.Errorf("finding the mcpbox binary: %w", err)
	}
	return sandbox.Mount{Source: exe, Target: selfTarget, Exec: true, Internal: true}, nil
}

// builtinSpec turns spec (the server's sandbox) into one that runs the
// built-in server s: mcpbox's own binary, mounted read-only.
func builtinSpec(s *config.Server, spec *sandbox.Spec) error {
	self, err := selfMount()
	if err != nil {
		return err
	}
	spec.Mounts = append(spec.Mounts, self)
	o := builtin.Options{
		Commands:       builtin.CommandPolicy{Allow: s.Commands.Allow, Deny: s.Commands.Deny, Approve: s.Commands.Approve},
		CommandTimeout: time.Duration(s.Limits.CallTimeout),
		JobLifetime:    time.Duration(s.Commands.JobLifetime),
	}
	if spec.Input != "" || s.Filesystem.Input != nil {
		o.Input = "/workspace/input"
		// An overlaid input is writable in the sandbox; the changes stay
		// in the overlay (mcpbox diff). The output inside the input is
		// covered by the sandbox, and named here for clear errors.
		o.InputWritable = s.Filesystem.Input != nil && s.Filesystem.Input.Mode == config.ModeOverlay
		o.InputHidden = spec.InputMasks()
	}
	if spec.Output != "" || s.Filesystem.Output != nil {
		o.Output = "/workspace/output"
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return err
	}
	spec.Args = []string{selfTarget, "__builtin", string(raw)}
	return nil
}

// Group is the spec of the shared sandbox of a group: its first member's
// sandbox policy, running mcpbox's supervisor (`mcpbox __group`), which
// starts the members (the group's servers in file order) with their own
// commands and environments. Like Server, it leaves the secrets to the
// caller: the supervisor passes each member its own (group.Member).
func Group(c *config.Config, members []*config.Server, o Options) (sandbox.Spec, error) {
	var spec sandbox.Spec
	if in := members[0].Filesystem.Input; in != nil && in.Mode == config.ModeOverlay {
		return spec, fmt.Errorf("server %s: filesystem.input.mode overlay is not available in a group's shared sandbox", members[0].Name)
	}
	if err := InputHidesState(members[0], o); err != nil {
		return spec, err
	}
	if err := serverSpec(c, members[0], o.base(), &spec); err != nil {
		return spec, err
	}
	spec.Env = nil // each member gets its own, through the supervisor
	if err := checkReach(&spec, o); err != nil {
		return spec, err
	}
	self, err := selfMount()
	if err != nil {
		return spec, err
	}
	spec.Mounts = append(spec.Mounts, self)
	var ms []group.Member
	for _, s := range members {
		m := group.Member{Name: s.Name, Argv: s.Command}
		for _, v := range s.Env {
			m.Env = append(m.Env, v.Name+"="+v.Value)
		}
		for _, sec := range s.Secrets {
			if sec.As != config.SecretAsFile {
				m.Secrets = append(m.Secrets, sec.Name)
			}
		}
		ms = append(ms, m)
	}
	membersJSON, err := json.Marshal(ms)
	if err != nil {
		return spec, err
	}
	// In the environment, not argv: env values may be sensitive, and a
	// process's argv is readable by every user of the host.
	spec.Env = append(spec.Env, GroupMembersEnv+"="+string(membersJSON))
	spec.Args = []string{selfTarget, "__group"}
	return spec, nil
}
