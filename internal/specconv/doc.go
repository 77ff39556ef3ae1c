// Package specconv converts what a user wrote into a sandbox.Spec: a
// config server (Server, Group, Policy for exec --policy) or the sandbox
// flags of exec and run (ApplyFlags). It is the one place that turns a
// config's or a flag's paths into host paths, and it refuses a spec that
// reaches what a sandbox must not: a project's symlink out of the project
// (sources are walked without following it), a writable source over the
// home dir, /etc or the input (workspace.Protected), mcpbox's state dir,
// and the files that decide what servers may do (Options.Protected: the
// lock file's dir, the config, the audit's JSONL copy). serve, run and
// pin pass those the same way, as data, through internal/daemon's wiring
// (servers.go); a group's sandbox gets them through launch.NewGroups.
//
// It must not start anything, resolve secrets or hold state: the caller
// resolves the secrets, adds the per-workspace parts (an output without a
// source, an input overlay) and calls sandbox.Start. For serve, run and
// pin that caller is internal/launch (Local.start); only `mcpbox exec`
// does it in internal/cli. It makes only the host dirs
// a config names as its output or artifacts dir, and the state dir.
//
// Layers: it sits between the config (internal/config: plain data) and
// the sandbox (internal/sandbox), like runc's libcontainer/specconv, at
// layer 2: it imports the leaves config, egress, instance, builtin and
// group (for the self-run sandboxes) and the layer-1 mechanisms sandbox
// and workspace, never internal/launch, internal/daemon or internal/cli.
package specconv
