package guard

// The sandboxes of the gateway as the admin commands see them: `mcpbox
// ps`, stop, pause, resume, snapshot and diff.

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/audit"
	"mcpbox/internal/gateway"
	"mcpbox/internal/track"
	"mcpbox/internal/workspace"
)

// SandboxRows joins the tracker's sandboxes with the gateway's instances.
func (g *Guard) SandboxRows(gw *gateway.Gateway) []admin.Sandbox {
	type key struct {
		server string
		scope  gateway.Scope
	}
	all := gw.Instances()
	inst := map[key]gateway.Instance{}
	for _, in := range all {
		inst[key{in.Server, in.Scope}] = in
	}
	// An instance is a scope's newest sandbox: its last call and counts
	// are not those of the scope's earlier, ended sandboxes.
	newest := map[key]time.Time{}
	for _, t := range g.tracks.All() {
		if k := (key{t.Launcher(), t.Scope()}); t.Started.After(newest[k]) {
			newest[k] = t.Started
		}
	}
	var rows []admin.Sandbox
	for _, t := range g.tracks.All() {
		r := admin.Sandbox{ID: t.ID, State: t.State(), Server: t.Launcher(), Client: t.Scope().Agent,
			Session: t.Scope().Session, Workspace: t.Workspace, Started: t.Started, Exit: t.Exit(), Pod: t.Pod, Prepared: t.Prepared}
		for _, d := range t.Writable() {
			if d.Target == "/workspace/output" {
				r.Output = d.Host
			}
		}
		if t.Scope().Modern {
			r.Era = gateway.ModernVersion
		}
		if t.Phase != nil && r.Exit == "" {
			r.Phase = t.Phase()
		}
		for _, s := range g.serversOf(t.Launcher()) {
			if in, ok := inst[key{s, t.Scope()}]; ok {
				if !t.Started.Before(newest[key{t.Launcher(), t.Scope()}]) {
					r.LastCall, r.Starts, r.Restarts = in.LastCall, in.Starts, in.Restarts
				}
				if r.Exit != "" {
					r.Reason = g.book.String(in.Reason)
				}
			}
		}
		if r.Exit == "" && !t.Started.Before(newest[key{t.Launcher(), t.Scope()}]) {
			r.Calls = g.running.of(t.Launcher(), t.Scope())
		}
		if t.Stats != nil && r.Exit == "" {
			if st, err := t.Stats(); err == nil {
				r.Memory, r.Pids, r.CPU = st.MemoryCurrent, st.PidsCurrent, st.CPUUsage.Seconds()
			}
		}
		rows = append(rows, r)
	}
	return append(rows, g.remoteRows(all)...)
}

// remoteRows are the rows of remote servers, which run no sandbox: the
// gateway's connections to them, one per scope, with no ID (nothing of
// theirs can be stopped, paused or snapshotted), in a stable order.
func (g *Guard) remoteRows(inst []gateway.Instance) []admin.Sandbox {
	var rows []admin.Sandbox
	for _, in := range inst {
		gs := g.servers[in.Server]
		if gs == nil || gs.remote == "" {
			continue
		}
		r := admin.Sandbox{State: in.State, Server: in.Server, Client: in.Scope.Agent, Session: in.Scope.Session,
			Started: in.Started, LastCall: in.LastCall, Starts: in.Starts, Restarts: in.Restarts, Remote: gs.remote,
			Calls: g.running.of(gs.launcher, in.Scope)}
		if in.Scope.Modern {
			r.Era = gateway.ModernVersion
		}
		if in.State != gateway.StateRunning {
			// A failed connection's error, a 401's hint: an error may
			// quote the URL, whose keys the book knows.
			r.Reason = g.book.String(in.Reason)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b admin.Sandbox) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Client, b.Client), cmp.Compare(a.Session, b.Session), cmp.Compare(a.Era, b.Era))
	})
	return rows
}

// Sandbox returns the sandbox with id (running or ended), or nil.
func (g *Guard) Sandbox(id string) *track.Sandbox { return g.tracks.Find(id) }

// serversOf names the servers whose sandboxes a launcher starts: the
// server itself, or a group's members.
func (g *Guard) serversOf(launcher string) []string {
	var out []string
	for name, gs := range g.servers {
		if gs.launcher == launcher {
			out = append(out, name)
		}
	}
	return out
}

// Control pauses, resumes or stops (op) the sandbox id through the
// gateway, which keeps its own view of the instance (a paused one is
// resumed by the next call); by is who asked ("cli:uid=N", "web:admin").
func (g *Guard) Control(gw *gateway.Gateway, op, id, by string) error {
	t := g.tracks.Find(id)
	if t == nil {
		return fmt.Errorf("no sandbox %q (see mcpbox ps)", id)
	}
	if st := t.State(); st == gateway.StateStopped || st == gateway.StateFailed {
		return fmt.Errorf("sandbox %s has ended", id)
	}
	// The sandbox's own pause, resume or end record says who asked.
	t.SetBy(cmp.Or(by, "admin"))
	var errs []error
	for _, s := range g.serversOf(t.Launcher()) {
		var err error
		switch op {
		case "pause":
			err = gw.Pause(s, t.Scope())
		case "resume":
			err = gw.Resume(s, t.Scope())
		case "stop":
			err = gw.Stop(s, t.Scope())
		}
		if err != nil && !errors.Is(err, gateway.ErrNoInstance) {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
		}
	}
	t.TakeBy() // the operation's record has taken it, if there was one
	return errors.Join(errs...)
}

// Snapshot writes sandbox id's workspace to path (new, mode 0600).
func (g *Guard) Snapshot(gw *gateway.Gateway, id, path string) error {
	t := g.tracks.Find(id)
	if t == nil {
		return fmt.Errorf("no sandbox %q (see mcpbox ps)", id)
	}
	parts := map[string]string{}
	for _, d := range t.Writable() {
		if d.Target == "/workspace/output" {
			parts["output"] = d.Host
		}
	}
	if t.Upper != "" {
		parts["overlay"] = t.Upper
	}
	if len(parts) == 0 {
		return fmt.Errorf("sandbox %s has no workspace (no output: {} and no input overlay)", id)
	}
	if t.State() == gateway.StateRunning {
		// Consistent: nothing writes while the copy is made.
		var paused []string
		for _, s := range g.serversOf(t.Launcher()) {
			if gw.Pause(s, t.Scope()) == nil {
				paused = append(paused, s)
			}
		}
		defer func() {
			for _, s := range paused {
				_ = gw.Resume(s, t.Scope())
			}
		}()
	}
	meta := workspace.Meta{Version: workspace.SnapshotVersion, Created: time.Now().UTC(), Server: t.Launcher(),
		Agent: t.Scope().Agent, Session: t.Scope().Session, Sandbox: t.ID}
	for p := range parts {
		meta.Parts = append(meta.Parts, p)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := workspace.Snapshot(f, meta, parts); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	g.Record(audit.Record{Event: audit.EventSnapshot, Server: t.Launcher(), Client: t.Scope().Agent, Session: t.Scope().Session,
		Sandbox: t.ID, Workspace: t.Workspace, Artifacts: []string{path}})
	return nil
}
