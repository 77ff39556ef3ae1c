package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
	"mcpbox/internal/workspace"
)

const snapshotHelp = `USAGE
  mcpbox snapshot ID [-o FILE] [--all | --config FILE | --state-dir DIR]
  mcpbox diff ID [--all | --config FILE | --state-dir DIR]
  mcpbox diff --server NAME [--agent AGENT] [--session ID] [--config FILE] [--discard]

snapshot writes the workspace of sandbox ID (its /workspace/output and,
with filesystem.input.mode overlay, the overlay's changes) as a .tar.gz
with metadata; the sandbox is paused meanwhile when it can be. Default
FILE: STATE_DIR/snapshots/ID-TIME.tar.gz. 'mcpbox serve --from-snapshot
FILE' (or the server's filesystem.template) seeds new workspaces from it.

diff prints what sandbox ID changed in its overlaid /workspace/input, as
a patch in git's format against the input source: the agent's patch (in
the source: mcpbox diff ID | git apply). Binary files, symlinks, changes
under .git and files the source changed after the agent copied
them are named on lines of their own, not patched. --server: the overlay
NAME's sandboxes left in the config's state dir (its one agent's, or
AGENT's), read with no serve running (a stdio client's ends with it);
with scope: session, or --session, the overlay of an ended session that
changed its input, kept when the session ended (the newest 20 are kept)
or left by a killed serve. --discard throws that overlay's changes away
(read them first), so the agent's next sandbox sees the input as it is.
`

func (e *env) snapshotCmd(args []string) int {
	fs := e.newFlagSet("snapshot", snapshotHelp)
	af := registerAdminFlags(fs)
	out := fs.String("o", "", "write the snapshot to `FILE`")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() != 1 {
		e.errorf("snapshot: want one sandbox ID (see mcpbox ps)")
		return exitUsage
	}
	c, ok := af.client(e, "snapshot")
	if !ok {
		return exitUsage
	}
	path, err := *out, error(nil)
	if path == "" {
		path, err = c.SnapshotPath(fs.Arg(0), time.Now())
	}
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		e.errorf("snapshot: %v", err)
		return 1
	}
	if err := c.Snapshot(fs.Arg(0), path); err != nil {
		e.errorf("snapshot: %v", err)
		return 1
	}
	fmt.Fprintln(e.stdout, path)
	return 0
}

func (e *env) diff(args []string) int {
	fs := e.newFlagSet("diff", snapshotHelp)
	af := registerAdminFlags(fs)
	server := fs.String("server", "", "the overlay server `NAME`'s sandboxes left, with no serve running")
	agent := fs.String("agent", "", "with --server: whose overlay, if several `AGENT`s have one")
	session := fs.String("session", "", "with --server: the overlay ended session `ID` kept (scope: session)")
	discard := fs.Bool("discard", false, "with --server: throw the overlay's changes away instead of printing them")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	var lower, upper string
	var err error
	switch {
	case *server != "" && fs.NArg() == 0 && *af.stateDir == "" && !*af.all:
		wd, _ := os.Getwd()
		lower, upper, err = daemon.LeftOverlay(*af.config, wd, *server, *agent, *session)
		if err == nil && *discard {
			if err = daemon.DiscardOverlay(upper); err == nil {
				fmt.Fprintf(e.stdout, "discarded the changes in %s: the next sandbox sees the input as it is\n", config.PrintableLine(upper))
				return 0
			}
		}
	case *server == "" && *agent == "" && *session == "" && !*discard && fs.NArg() == 1:
		c, ok := af.client(e, "diff")
		if !ok {
			return exitUsage
		}
		lower, upper, err = c.Diff(fs.Arg(0))
	default:
		e.errorf("diff: want one sandbox ID (see mcpbox ps), or --server NAME [--agent AGENT] [--session ID] [--config FILE] [--discard]")
		return exitUsage
	}
	if err != nil {
		e.errorf("diff: %v", err)
		return 1
	}
	var out io.Writer = e.stdout
	if f, ok := e.stdout.(*os.File); ok && isTerminal(f) {
		out = workspace.TermSafe(e.stdout) // the content is the sandbox's
	}
	if err := daemon.WriteDiff(out, e.stderr, lower, upper); err != nil {
		e.errorf("diff: %v", err)
		return 1
	}
	return 0
}
