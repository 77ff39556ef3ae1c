package cli

import "mcpbox/internal/daemon"

const uiHelp = `USAGE
  mcpbox ui [--print-url] [--config FILE | --state-dir DIR]

Opens the dashboard (/ui/) of the project's running mcpbox serve: prints
a one-time login URL (5 minutes, one use) and opens a browser where
xdg-open (macOS: open) exists; --print-url only prints it.
`

func (e *env) ui(args []string) int {
	fs := e.newFlagSet("ui", uiHelp)
	af := registerAdminFlags(fs)
	printOnly := fs.Bool("print-url", false, "print the login URL and exit")
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
	u, err := daemon.UILoginURL(dir)
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
