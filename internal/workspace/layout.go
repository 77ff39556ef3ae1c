package workspace

// The per-scope workspaces under a root (the state dir's workspaces/):
// where a sandbox's output and input overlay live on the host, how a new
// one is seeded, where its artifacts go.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Scope names the workspace of one server for one agent, or one session of
// it. It mirrors the gateway's scope in plain strings: this package knows
// nothing of the gateway.
type Scope struct {
	// Server is the server's name (a group's launcher name for a group).
	Server string
	// Agent is the agent; "" is the shared scope, whose dir is _shared.
	Agent string
	// Session is the session; "" for an agent's or the shared workspace.
	Session string
}

// agentDir is the dir name of an agent: _shared for the shared scope.
func agentDir(agent string) string {
	if agent == "" {
		return "_shared"
	}
	return agent
}

// Base is a scope's workspace: ROOT/AGENT/SERVER, with a sessions/ID level
// for a session and _shared for the shared scope. Output and overlay dirs
// are made beneath it; Remove removes it.
func Base(root string, s Scope) string {
	dir := filepath.Join(root, agentDir(s.Agent), s.Server)
	if s.Session != "" {
		dir = filepath.Join(dir, "sessions", s.Session)
	}
	return dir
}

// MakeOutput makes the per-scope output dir, BASE/output, and returns its
// real path.
func MakeOutput(root string, s Scope) (string, error) {
	dir, err := mkdirBeneath(root, filepath.Join(Base(root, s), "output"))
	if err != nil {
		return "", fmt.Errorf("creating workspace: %w", err)
	}
	return dir, nil
}

// MakeOverlay makes the upper and work dirs of a scope's input overlay,
// BASE/overlay/{upper,work}, and returns their real paths: their parent is
// mounted into the sandbox init (never the workload), so it holds nothing
// else.
func MakeOverlay(root string, s Scope) (upper, work string, err error) {
	dir := filepath.Join(Base(root, s), "overlay")
	for _, d := range []struct {
		dst  *string
		name string
	}{{&upper, "upper"}, {&work, "work"}} {
		real, err := mkdirBeneath(root, filepath.Join(dir, d.name))
		if err != nil {
			return "", "", fmt.Errorf("creating the input overlay: %w", err)
		}
		*d.dst = real
	}
	return upper, work, nil
}

// mkdirBeneath makes dir, a path beneath root, and returns its real path.
// Below root no symlink is followed: sandboxes wrote in the workspaces
// tree, and a link planted there must not put a sandbox's mount, or our
// writes, elsewhere on the host.
func mkdirBeneath(root, dir string) (string, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", err
	}
	return MakeHostDir(root, rel, 0o700)
}

// Remove removes a workspace dir (a Base). The kernel leaves an overlay's
// work/work dir with mode 0, which an unprivileged owner must open up
// first.
func Remove(base string) {
	_ = RemoveOverlay(base)
	os.RemoveAll(base)
}

// RemoveOverlay removes the input overlay of a workspace dir (a Base):
// its changes are gone, and the next sandbox's overlay starts empty.
func RemoveOverlay(base string) error {
	_ = os.Chmod(filepath.Join(base, "overlay", "work", "work"), 0o700)
	return os.RemoveAll(filepath.Join(base, "overlay"))
}

// KeptOverlays bounds the ended sessions' overlays kept per agent and
// server (ReleaseSession): the oldest go first.
const KeptOverlays = 20

// endedMark, in a session's workspace, says the session has ended and
// its overlay was kept for its changes.
const endedMark = "ended"

// ReleaseSession removes an ended session's workspace (base, under the
// workspaces root), except an input overlay the session changed: the
// agent's edits to the input are not thrown away with the session. That
// overlay stays, marked ended, for `mcpbox diff --server --session`; of
// the scope's kept overlays the newest KeptOverlays stay. It reports
// whether it kept one now (not: kept before), and the ones it removed to
// stay within the bound.
func ReleaseSession(base string) (kept bool, pruned []string) {
	upper := filepath.Join(base, "overlay", "upper")
	if entries, err := os.ReadDir(upper); err != nil || len(entries) == 0 {
		Remove(base)
		return false, nil
	}
	os.RemoveAll(filepath.Join(base, "output"))
	f, err := os.OpenFile(filepath.Join(base, endedMark), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil // kept already (a second release of the session)
	} else if err != nil {
		return true, nil // left in place, unmarked: the next start looks again
	}
	f.Close()
	sessions := filepath.Dir(base)
	ended := EndedSessions(sessions)
	for len(ended) > KeptOverlays {
		Remove(filepath.Join(sessions, ended[0].ID))
		pruned = append(pruned, ended[0].ID)
		ended = ended[1:]
	}
	return true, pruned
}

// IsEnded reports whether base is an ended session's workspace whose
// overlay ReleaseSession kept.
func IsEnded(base string) bool {
	fi, err := os.Lstat(filepath.Join(base, endedMark))
	return err == nil && fi.Mode().IsRegular()
}

// Ended is an ended session whose input overlay was kept.
type Ended struct {
	ID    string
	Ended time.Time
}

// EndedSessions lists the ended sessions with a kept overlay in dir (a
// scope's sessions/), oldest first. Only real dirs count, as a sandbox
// made them: a link must not lead a diff elsewhere.
func EndedSessions(dir string) []Ended {
	entries, _ := os.ReadDir(dir)
	var out []Ended
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, e.Name(), endedMark))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, Ended{ID: e.Name(), Ended: fi.ModTime()}) // IsEnded, with the time
	}
	slices.SortFunc(out, func(a, b Ended) int { return a.Ended.Compare(b.Ended) })
	return out
}

// UnreleasedSessions lists the sessions in dir (a scope's sessions/) that
// were never released but whose input overlay holds changes, oldest change
// first: a running session's, or, while no serve runs on the state dir, a
// killed serve's, which its next start keeps (ReleaseSession). Ended is
// the time of the overlay's last change at its top. Only real dirs count.
func UnreleasedSessions(dir string) []Ended {
	entries, _ := os.ReadDir(dir)
	var out []Ended
	for _, e := range entries {
		base := filepath.Join(dir, e.Name())
		upper := filepath.Join(base, "overlay", "upper")
		fi, err := os.Lstat(upper)
		if !e.IsDir() || IsEnded(base) || err != nil || !fi.IsDir() {
			continue
		}
		if changes, _ := os.ReadDir(upper); len(changes) > 0 {
			out = append(out, Ended{ID: e.Name(), Ended: fi.ModTime()})
		}
	}
	slices.SortFunc(out, func(a, b Ended) int { return a.Ended.Compare(b.Ended) })
	return out
}

// IsSnapshot reports whether path is an mcpbox snapshot (an archive with
// snapshot metadata).
func IsSnapshot(path string) bool {
	if path == "" {
		return false
	}
	_, err := ReadMeta(path)
	return err == nil
}

// SeedPart fills a new workspace dir dst from a template: a snapshot's
// part (output, overlay; a part the snapshot lacks leaves dst empty), or
// a dir or archive for the output (Seed). Any other part of a template
// that is not a snapshot leaves dst empty.
func SeedPart(template, part, dst string) error {
	var err error
	switch {
	case IsSnapshot(template):
		err = Restore(template, part, dst)
		if errors.Is(err, ErrNoPart) {
			err = nil // the snapshot's sandbox had no such part
		}
	case part == "output":
		// Seed wants an empty dir: dst was just made.
		err = Seed(dst, template)
	}
	return err // it names the template and the workspace
}

// ArtifactsDir is where Export puts the artifacts of sandbox id:
// ROOT/AGENT/SERVER/ID, for every session of the agent alike.
func ArtifactsDir(root string, s Scope, id string) string {
	return filepath.Join(root, agentDir(s.Agent), s.Server, id)
}
