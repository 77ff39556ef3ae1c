package cli

import (
	"errors"

	"mcpbox/internal/daemon"
)

const uiHelp = `USAGE
  mcpbox ui [--print-url] [--rotate] [--instance PID] [--config FILE | --state-dir DIR]

Opens the dashboard (/ui/) of the project's running mcpbox serve: prints
a one-time login URL (5 minutes, one use) and opens a browser where
xdg-open (macOS: open) exists; --print-url only prints it. Each instance
has its own dashboard: when several run on the state dir, ui lists them
and --instance PID (the INSTANCE column of mcpbox ps) chooses one; it
also chooses between the serves of several configs in one project, and
names another project's serve from anywhere.
The URL is signed with the state dir's dashboard-secret file (made here
when there is none; it also logs in pasted at /ui/, as an admin).
--rotate replaces it first: every dashboard session and login URL made
before ends, on every serve using the state dir. The /mcp token does
not log in.
`

func (e *env) ui(args []string) int {
	fs := e.newFlagSet("ui", uiHelp)
	af := registerOneDirFlags(fs)
	printOnly := fs.Bool("print-url", false, "print the login URL and exit")
	rotate := fs.Bool("rotate", false, "replace the dashboard secret first, ending every session")
	pid := fs.Int("instance", 0, "the instance `PID` whose dashboard to open, when several run (see mcpbox ps)")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() > 0 {
		e.errorf("ui: unexpected arguments %q", fs.Args())
		return exitUsage
	}
	if *pid < 0 {
		e.errorf("ui: --instance %d: want a pid", *pid)
		return exitUsage
	}
	dir, err := daemon.InstanceAdminDir(*af.config, *af.stateDir, *af.all, *pid)
	if err != nil {
		e.errorf("ui: %v", err)
		return exitUsage
	}
	u, err := daemon.UILoginURL(dir, *pid, *rotate)
	if errors.Is(err, daemon.ErrNoServe) {
		e.errorf("ui: %v: start one with %s", err, commandLine("serve", daemon.UIServeArgs(*af.config, *af.stateDir)))
		return 1
	}
	if err != nil {
		e.errorf("ui: %v", err)
		return 1
	}
	e.stdout.Write([]byte(u + "\n"))
	if !*printOnly {
		daemon.OpenBrowser(u)
	}
	return 0
}
