package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"mcpbox/internal/workspace"
)

const snapshotHelp = `USAGE
  mcpbox snapshot ID [-o FILE] [--all | --config FILE | --state-dir DIR]
  mcpbox diff ID [--all | --config FILE | --state-dir DIR]

snapshot writes the workspace of sandbox ID (its /workspace/output and,
with filesystem.input.mode overlay, the overlay's changes) as a .tar.gz
with metadata; the sandbox is paused meanwhile when it can be. Default
FILE: STATE_DIR/snapshots/ID-TIME.tar.gz. 'mcpbox serve --from-snapshot
FILE' (or the server's filesystem.template) seeds new workspaces from it.

diff prints what sandbox ID changed in its overlaid /workspace/input, as
a unified diff against the input source: the agent's patch.
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
	dir, ok := af.dir(e, "snapshot")
	if !ok {
		return exitUsage
	}
	path := *out
	if path == "" {
		snaps := filepath.Join(dir, "snapshots")
		if err := os.MkdirAll(snaps, 0o700); err != nil {
			e.errorf("snapshot: %v", err)
			return 1
		}
		path = filepath.Join(snaps, fmt.Sprintf("%s-%s.tar.gz", fs.Arg(0), time.Now().UTC().Format("20060102T150405Z")))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		e.errorf("snapshot: %v", err)
		return 1
	}
	if _, err := adminCall(dir, adminRequest{Op: "snapshot", ID: fs.Arg(0), Path: abs}); err != nil {
		e.errorf("snapshot: %v", err)
		return 1
	}
	fmt.Fprintln(e.stdout, abs)
	return 0
}

func (e *env) diff(args []string) int {
	fs := e.newFlagSet("diff", snapshotHelp)
	af := registerAdminFlags(fs)
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() != 1 {
		e.errorf("diff: want one sandbox ID (see mcpbox ps)")
		return exitUsage
	}
	dir, ok := af.dir(e, "diff")
	if !ok {
		return exitUsage
	}
	r, err := adminCall(dir, adminRequest{Op: "diff", ID: fs.Arg(0)})
	if err != nil {
		e.errorf("diff: %v", err)
		return 1
	}
	var out io.Writer = e.stdout
	if f, ok := e.stdout.(*os.File); ok && isTerminal(f) {
		out = termSafe{e.stdout} // the content is the sandbox's
	}
	if err := workspace.Diff(out, r.Lower, r.Upper); err != nil {
		e.errorf("diff: %v", err)
		return 1
	}
	return 0
}

// termSafe writes control characters (but newline and tab) as \xNN, and
// C1 controls as \u00NN: a file the sandbox wrote must not drive the
// reader's terminal (hide lines, rewrite what was shown).
type termSafe struct{ w io.Writer }

func (t termSafe) Write(p []byte) (int, error) {
	var b []byte
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\n' || c == '\t':
			b = append(b, c)
		case c < 0x20 || c == 0x7f:
			b = fmt.Appendf(b, "\\x%02x", c)
		case c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] < 0xa0:
			b = fmt.Appendf(b, "\\u%04x", p[i+1])
			i++
		default:
			b = append(b, c)
		}
	}
	if _, err := t.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
