// Package instance is where running `mcpbox serve` processes are found:
// the state dir of a project, one record and admin socket per running
// instance inside a state dir, and the registry of the user's state dirs.
//
// Model. Every project has its own state dir unless its config names one
// (state_dir): $XDG_STATE_HOME/mcpbox/projects/NAME-HASH (XDG_STATE_HOME
// defaults to ~/.local/state), where HASH is taken from the real path of
// the config file, or, for the embedded default, of the directory it
// serves, and NAME is that directory's base name (for people reading
// ls). Two projects therefore never share a state dir. Several instances
// may share one (the same config from two clients, stdio beside HTTP):
// each has its own admin socket STATE/instances/PID.sock and record
// STATE/instances/PID.json (pid, start time, project, config, transport,
// URL); the audit store and the approvals live in one SQLite file in WAL
// mode that every instance writes, and the pins in the flock-serialized
// lock file. No lock is held for an instance's lifetime; Lock is held
// only while an instance starts (it removes what dead instances left, and
// decides whether it is alone and may remove session workspaces).
//
// A record counts as live while a process of this user (or root),
// outside every sandbox, answers on its socket (Serves): a record
// is written after its socket listens and removed before it closes, so a
// record whose socket refuses connections was left by a process that died
// (RemoveStale removes it at the next start).
//
// Input overlays. Instances on one state dir serve the same agent, so two
// of their sandboxes could mount one input overlay (an upper dir shared
// by two overlay mounts is undefined): LockOverlay holds a flock of the
// overlay workspace for as long as a sandbox has it mounted.
//
// Registry. Each state dir an instance ran on is named by a symlink in
// $XDG_STATE_HOME/mcpbox/statedirs, so `--all` finds state dirs that a
// config placed elsewhere. Dangling links are skipped and removed.
package instance
