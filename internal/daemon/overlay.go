package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
	"mcpbox/internal/specconv"
	"mcpbox/internal/workspace"
)

// LeftOverlay finds the input overlay that server's sandboxes left in the
// state dir of a config, for `mcpbox diff --server` once the serve that
// ran them has stopped (a stdio client's serve ends with the client). It
// returns the input source (lower) and the overlay's upper dir.
// configPath "" is the project config of wd or its nearest parent that
// has one. agent "" is the one agent whose workspace has an overlay;
// with several, the error names them. With session, or for a server of
// scope session, it is an ended session's kept overlay
// (workspace.ReleaseSession), or, while no serve runs on the state dir, a
// killed serve's session's: session "" is the one kept.
func LeftOverlay(configPath, wd, server, agent, session string) (lower, upper string, err error) {
	if configPath == "" {
		if configPath = projectConfigUp(wd); configPath == "" {
			return "", "", fmt.Errorf("no mcpbox.yaml in %s or a parent directory: pass --config FILE", wd)
		}
	}
	if configPath, err = filepath.Abs(configPath); err != nil {
		return "", "", err
	}
	c, err := LoadConfig(configPath)
	if err != nil {
		return "", "", err
	}
	s := c.Server(server)
	switch {
	case s == nil:
		return "", "", fmt.Errorf("%s has no server %q", configPath, server)
	case s.Filesystem.Input == nil || s.Filesystem.Input.Mode != config.ModeOverlay:
		return "", "", fmt.Errorf("server %s has no input overlay (filesystem.input.mode: overlay)", server)
	}
	if lower, err = specconv.InputDir(s, filepath.Dir(configPath)); err != nil {
		return "", "", fmt.Errorf("server %s: filesystem.input: %w", server, err)
	}
	stateDir, err := specconv.ConfigStateDir(c, configPath)
	if err != nil {
		return "", "", err
	}
	root := filepath.Join(stateDir, "workspaces")
	switch {
	case !pathElement(agent):
		return "", "", fmt.Errorf("--agent %q: not an agent name", agent)
	case !pathElement(session):
		return "", "", fmt.Errorf("--session %q: not a session id", session)
	case session != "" || s.Scope == config.ScopeSession:
		// With no serve on the state dir, a session never released is a
		// killed serve's: its changes are the agent's work as much as a
		// kept one's (the next start keeps them).
		live, lerr := instance.List(stateDir)
		upper, err := keptOverlay(root, server, agent, session, lerr == nil && len(live) == 0)
		if err != nil && session == "" {
			if agents := overlayAgents(root, server); len(agents) > 0 {
				// An overlay of the agent scope, from before scope: session
				// (the lock's advice), is the agent's work too.
				err = fmt.Errorf("%w; server %s also has an overlay of the agent scope (agents: %s), from before scope: session: without scope: session in the config, mcpbox diff --server %[2]s prints it", err, server, strings.Join(agents, ", "))
			}
		}
		return lower, upper, err
	}
	agents := overlayAgents(root, server)
	switch {
	case agent != "" && !slices.Contains(agents, agent):
		return "", "", fmt.Errorf("no overlay of server %s for agent %s in %s (agents with one: %s)", server, agent, root, listOrNone(agents))
	case agent == "" && len(agents) == 0:
		return "", "", fmt.Errorf("no overlay of server %s in %s: no sandbox of it has written to /workspace/input", server, root)
	case agent == "" && len(agents) > 1:
		return "", "", fmt.Errorf("server %s has overlays for several agents (%s): pass --agent AGENT", server, strings.Join(agents, ", "))
	case agent == "":
		agent = agents[0]
	}
	return lower, filepath.Join(workspace.Base(root, workspace.Scope{Server: server, Agent: agent}), "overlay", "upper"), nil
}

// pathElement reports whether name, if set, is one path element.
func pathElement(name string) bool {
	return !strings.ContainsRune(name, '/') && name != "." && name != ".."
}

// keptOverlay is the upper dir of the overlay an ended session of server
// left (of agent, if set): the session's, or, for session "", the one
// kept; with several, the error names the newest. killed: sessions never
// released whose overlays hold changes count as ended, at their last
// change.
func keptOverlay(root, server, agent, session string, killed bool) (string, error) {
	type kept struct {
		agent string
		workspace.Ended
	}
	var all []kept
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if (agent != "" && e.Name() != agent) || !realDirs(root, e.Name(), server, "sessions") {
			continue
		}
		sessions := filepath.Join(root, e.Name(), server, "sessions")
		ended := workspace.EndedSessions(sessions)
		if killed {
			ended = append(ended, workspace.UnreleasedSessions(sessions)...)
		}
		for _, s := range ended {
			if session == "" || s.ID == session {
				all = append(all, kept{e.Name(), s})
			}
		}
	}
	slices.SortFunc(all, func(a, b kept) int { return a.Ended.Ended.Compare(b.Ended.Ended) })
	switch {
	case len(all) == 0 && session != "":
		return "", fmt.Errorf("no ended session %s of server %s kept changes to its input overlay in %s (a running session's: mcpbox diff ID, see mcpbox ps)", session, server, root)
	case len(all) == 0:
		return "", fmt.Errorf("no ended session of server %s (scope: session) kept changes to its input overlay in %s (a running session's: mcpbox diff ID, see mcpbox ps)", server, root)
	case len(all) > 1:
		var names []string
		for _, k := range all[max(0, len(all)-5):] {
			names = append(names, fmt.Sprintf("%s (agent %s, ended %s)", k.ID, k.agent, k.Ended.Ended.Format(time.DateTime)))
		}
		slices.Reverse(names)
		return "", fmt.Errorf("%d ended sessions of server %s kept changes to their input overlay: pass --session ID (the newest: %s)", len(all), server, strings.Join(names, ", "))
	}
	k := all[0]
	if !realDirs(root, k.agent, server, "sessions", k.ID, "overlay", "upper") {
		return "", fmt.Errorf("the overlay of session %s of server %s is not a directory", k.ID, server)
	}
	return filepath.Join(root, k.agent, server, "sessions", k.ID, "overlay", "upper"), nil
}

// overlayAgents are the agents (dir names: _shared, _local, ...) that have
// an input overlay of server under root, sorted. Only real dirs count: a
// sandbox wrote in this tree, and a link must not lead the diff elsewhere.
func overlayAgents(root, server string) []string {
	entries, _ := os.ReadDir(root)
	var agents []string
	for _, e := range entries {
		if realDirs(root, e.Name(), server, "overlay", "upper") {
			agents = append(agents, e.Name())
		}
	}
	return agents
}

// realDirs reports whether each of dir/parts[0], dir/parts[0]/parts[1],
// ... is a directory, not a link to one.
func realDirs(dir string, parts ...string) bool {
	for _, p := range parts {
		dir = filepath.Join(dir, p)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// projectConfigUp is the project config of dir or its nearest parent
// that has one (admin.ProjectConfig), "" if none has.
func projectConfigUp(dir string) string {
	for {
		if p := admin.ProjectConfig(dir); p != "" {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// WriteDiff is `mcpbox diff`: the patch of the overlay's upper dir over
// the input source lower, on out (workspace.Diff), and, on stderr, how to
// apply it where the source is a directory below a git repository's top
// (a monorepo's package): git apply reads a patch's paths from the top,
// and run in the directory it skips them without a word, exit status 0.
func WriteDiff(out, stderr io.Writer, lower, upper string) error {
	if top := gitTop(lower); top != "" && top != lower {
		rel, err := filepath.Rel(top, lower)
		if err == nil {
			printLine(stderr, "mcpbox: diff: note: %s is below the top of the git repository %s, from which git apply reads a patch's paths (skipping, without a word, those outside the directory it runs in): apply it with  git apply --directory=%s  (or patch -p1 in %s)\n", lower, top, rel, lower)
		}
	}
	return workspace.Diff(out, lower, upper)
}

// gitTop is the nearest directory at or above dir that holds a .git (a
// repository's directory, or a worktree's file); "" if none does.
func gitTop(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// DiscardOverlay throws away the changes in the input overlay whose upper
// dir LeftOverlay found, for `mcpbox diff --server --discard`: the
// agent's next sandbox of the server sees the source as it is now. It
// holds the overlay's lock meanwhile, so no sandbox has it mounted (a
// running one's is refused: stop it first); a kept session's workspace
// goes whole, as its other dirs went when the session ended.
func DiscardOverlay(upper string) error {
	base := filepath.Dir(filepath.Dir(upper))
	unlock, err := instance.LockOverlay(base)
	if errors.Is(err, instance.ErrOverlayBusy) {
		return fmt.Errorf("a running sandbox has the overlay mounted (%s): stop it first (mcpbox ps; mcpbox stop ID), then discard", base)
	} else if err != nil {
		return err
	}
	defer unlock()
	if filepath.Base(filepath.Dir(base)) == "sessions" {
		workspace.Remove(base)
	} else if err := workspace.RemoveOverlay(base); err != nil {
		return fmt.Errorf("discarding the input overlay: %w", err)
	}
	if _, err := os.Lstat(upper); err == nil {
		return fmt.Errorf("discarding the input overlay: %s is still there", upper)
	}
	return nil
}
