package cli

import (
	"errors"
	"os"

	"mcpbox/internal/daemon"
)

const uiHelp = `USAGE
  mcpbox ui [--print-url] [--instance PID] [--config FILE | --state-dir DIR]

Opens the dashboard (/ui/) of the project's running mcpbox serve: prints
a one-time login URL (5 minutes, one use) and opens a browser where
xdg-open (macOS: open) exists; --print-url only prints it. Each instance
has its own dashboard: when several run on the state dir, ui lists them
and --instance PID (the INSTANCE column of mcpbox ps) chooses one.
`

func (e *env) ui(args []string) int {
	fs := e.newFlagSet("ui", uiHelp)
	af := registerOneDirFlags(fs)
	printOnly := fs.Bool("print-url", false, "print the login URL and exit")
	pid := fs.Int("instance", 0, "the instance `PID` whose dashboard to open, when several run (see mcpbox ps)")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() > 0 {
		e.errorf("ui: unexpected arguments %q", fs.Args())
		return exitUsage
	}
	dir, ok := af.dir(e, "ui")
	if !ok {
		return exitUsage
	}
	if *pid < 0 {
		e.errorf("ui: --instance %d: want a pid", *pid)
		return exitUsage
	}
	u, err := daemon.UILoginURL(dir, *pid)
	if errors.Is(err, daemon.ErrNoServe) {
		e.errorf("ui: %v: start one with %s", err, serveHint(af))
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

// serveHint is the serve command whose dashboard mcpbox ui with these
// flags would open: with the config named, or the one in the current
// directory that a user who ran no serve yet means.
func serveHint(af adminFlags) string {
	var args []string
	switch {
	case *af.config != "":
		args = []string{"--config", *af.config}
	case *af.stateDir != "":
		args = []string{"--state-dir", *af.stateDir}
	default:
		if _, err := os.Stat("mcpbox.yaml"); err == nil {
			args = []string{"--config", "mcpbox.yaml"}
		}
	}
	return commandLine("serve", append(args, "--http", "127.0.0.1:8765"))
}
