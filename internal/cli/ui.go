package cli

import (
	"fmt"

	"mcpbox/internal/daemon"
)

const uiHelp = `USAGE
  mcpbox ui [--print-url] [--config FILE | --state-dir DIR]

Opens the dashboard of the project's running mcpbox serve (on its HTTP
listener, /ui/): prints a one-time login URL (valid 5 minutes, one use)
and opens it in a browser where xdg-open exists; --print-url only prints.
`

func (e *env) ui(args []string) int {
	fs := e.newFlagSet("ui", uiHelp)
	af := registerAdminFlags(fs)
	printOnly := fs.Bool("print-url", false, "print the login URL and exit")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	dir, ok := af.dir(e, "ui")
	if ok && (fs.NArg() > 0 || dir == allStateDirs) {
		e.errorf("ui: takes no arguments and one instance (not --all)")
	}
	if !ok || fs.NArg() > 0 || dir == allStateDirs {
		return exitUsage
	}
	u, err := daemon.UILoginURL(dir)
	if err != nil {
		e.errorf("ui: %v", err)
		return 1
	}
	fmt.Fprintln(e.stdout, u)
	if !*printOnly {
		daemon.OpenBrowser(u)
	}
	return 0
}
