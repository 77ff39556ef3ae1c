// Package specconv converts what a user wrote into a sandbox.Spec: a
// config server (Server, Group, Policy for exec --policy) or the sandbox
// flags of exec and run (ApplyFlags). It is the one place that turns a
// config's or a flag's paths into host paths, and it refuses a spec that
// reaches what a sandbox must not: a project's symlink out of the project
// (sources are walked without following it), a writable source over the
// home dir, /etc or the input (workspace.Protected), mcpbox's state dir,
// and the files that decide what servers may do (Options.Protected: the
// lock file's dir, the config, the audit's JSONL copy). Every command
// that starts a config's servers (serve, pin, groups) passes those the
// same way, as data.
//
// It must not start anything, resolve secrets or hold state: the caller
// (internal/cli, and the launcher a sandbox start goes through) resolves
// the secrets, adds the per-workspace parts (an output without a source,
// an input overlay) and calls sandbox.Start. It makes only the host dirs
// a config names as its output or artifacts dir, and the state dir.
//
// Layers: it sits between the config (internal/config: plain data) and
// the sandbox (internal/sandbox), like runc's libcontainer/specconv, and
// imports leaf packages only (config, sandbox, egress, workspace,
// instance, builtin and group for the self-run sandboxes), never
// internal/cli.
package specconv
