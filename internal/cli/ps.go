package cli

import (
	"fmt"
	"strings"
	"time"

	"mcpbox/internal/admin"
)

const psHelp = `USAGE
  mcpbox ps [--json] [--instances] [--all | --config FILE | --state-dir DIR]
  mcpbox stop ID | pause ID | resume ID [--all | --config FILE | --state-dir DIR]

ps lists the running mcpbox serve instances of the project the current
directory is in (of each config served there; or of the config or state
dir named; --all, or in a directory of no project: every instance of
this user), with their pid, project, transport and URL (and the file
holding the bearer token an HTTP endpoint without clients wants: the
path, never the token), and their sandboxes: running and paused ones,
and the last ones that ended, with their owner, server, state, start,
last call (or the calls in hand: the oldest, running or awaiting
approval, for how long, how many more; "calls" in --json), resource use,
(kubernetes) pod and phase, and the host dir of its /workspace/output
(relative to the instance's state dir when beneath it); a remote
server's rows are the connections to it (its origin, no ID: nothing to
stop or pause). --json
prints the sandboxes, one object per line, with the pid ("instance") and
project of the instance that runs each; on stderr, what those lines
cannot carry: an instance that did not list its sandboxes, a server an
instance could not set up. --instances only the instances (with --json:
one object per line, the pid in "id", the servers it could not set up in
"unavailable", an instance that did not answer with "error").

stop ends a sandbox (its calls in flight fail; the next call of its client
starts a new one, with the workspace kept; ps: "stopped by cli:uid=N");
pause freezes it (nothing runs, memory is kept; the next call resumes it;
a Kubernetes pod cannot be paused); resume thaws it now. Like ps, they ask
the instances of each config served in the project; the ID picks one.
`

func (e *env) ps(args []string) int {
	fs := e.newFlagSet("ps", psHelp)
	af := registerAdminFlags(fs)
	asJSON := fs.Bool("json", false, "one JSON object per line")
	only := fs.Bool("instances", false, "list the serve instances only")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() > 0 {
		// "ps ID" is a natural guess; a silently ignored ID would list
		// everything as if it had been honoured.
		e.errorf("ps: unexpected arguments %q (ps lists every sandbox; stop, pause and resume take an ID)", fs.Args())
		return exitUsage
	}
	c, ok := af.client(e, "ps")
	if !ok {
		return exitUsage
	}
	views, err := c.Views()
	if err != nil {
		e.errorf("ps: %v", err)
		return 1
	}
	if *only {
		admin.WriteInstances(e.stdout, views, *asJSON)
		return 0
	}
	if !*asJSON {
		admin.WriteInstances(e.stdout, views, false)
		fmt.Fprintln(e.stdout)
	}
	admin.WriteSandboxes(e.stdout, views, *asJSON, time.Now())
	if *asJSON { // the table has them in its instances' part
		for _, n := range admin.Notes(views) {
			e.errorf("ps: %s", n)
		}
	}
	return 0
}

// control is `mcpbox stop|pause|resume ID`.
func (e *env) control(op string, args []string) int {
	fs := e.newFlagSet(op, psHelp)
	af := registerAdminFlags(fs)
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() != 1 || !strings.HasPrefix(fs.Arg(0), "sbx_") {
		e.errorf("%s: want one sandbox ID (sbx_..., see mcpbox ps)", op)
		return exitUsage
	}
	c, ok := af.client(e, op)
	if !ok {
		return exitUsage
	}
	if err := c.Control(op, fs.Arg(0)); err != nil {
		e.errorf("%s: %v", op, err)
		return 1
	}
	fmt.Fprintf(e.stdout, "%s: %s\n", op, fs.Arg(0))
	return 0
}
