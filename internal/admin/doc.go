// Package admin is the admin protocol of a running `mcpbox serve`: the
// unix sockets it answers on (the admin socket of its instance, the
// approvals endpoint), the checks of who is at the other end, a table of
// handlers (one per operation), and the typed client the admin commands
// (ps, approvals, approve and deny, trust, stop, pause, resume, snapshot,
// diff, secrets rotate, pin reload, ui) call, which fans a request out over
// every instance of a project.
//
// Protocol. A client sends one JSON line (an op and its fields) and reads
// one JSON line back (ok, error and the op's answer). The field names are
// a contract: an older and a newer mcpbox talk across an upgrade, and
// internal/load speaks it directly.
//
// Layers. admin is layer 2: below internal/guard, internal/daemon and
// internal/cli, above internal/instance (records, registry, socket
// paths), which it uses. It decides nothing about calls, approvals or
// sandboxes: the server reaches them through Backend, an interface in
// plain data types that internal/guard implements (Guard.Admin) and
// internal/daemon attaches (Instance.Attach).
// It must not import internal/cli or the call pipeline; the syscalls of
// the sockets (umask, SO_PEERCRED; LOCAL_PEERCRED on macOS) live here so
// that the CLI has none.
package admin
