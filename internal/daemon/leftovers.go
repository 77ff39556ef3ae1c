package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/instance"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/workspace"
)

// staleCgroupRetry is when cleanLeftovers looks at the sandbox cgroups a
// second time: package cgroup spares those younger than a few seconds
// (another mcpbox may be between creating one and moving its sandbox in),
// which a gateway restarted right after a crash still has.
const staleCgroupRetry = 6 * time.Second

// cleanLeftovers removes what a gateway on stateDir that died without
// cleaning up (SIGKILL, OOM kill, power loss) left behind: the session
// workspaces (workspaces/AGENT/SERVER/sessions/ID: their sessions are
// gone), sockets in the state dir nobody answers on, and, host-wide, the
// sandbox cgroups and egress socket dirs of mcpbox processes that no
// longer run, and the frozen sandboxes of a gateway killed while they were
// paused whose thaw guard died too (cgroup.CleanupStale). Its other
// sandboxes died with it (their init has PDEATHSIG; a paused one is thawed
// by its thaw guard, so the signal acts), and their mounts with their
// mount namespaces. Agent
// workspaces (workspaces/AGENT/SERVER/output) are the agent's files and
// stay, as do the audit store with its WAL (SQLite replays it) and
// lock-file flocks (another process may hold one).
//
// Every removal is logged: this state dir's at info, the host-wide ones
// at debug (they are mostly other gateways' and projects', and would
// land in the log of whichever client started serve next). Errors are
// returned joined; what could be removed is.
//
// shared: another live instance uses stateDir (package instance). Its
// session workspaces are not told apart from a crashed one's, so none is
// removed then; the next instance that starts alone removes them.
//
// Preconditions: this process holds the state dir's start lock
// (instance.Lock) and started no sandbox on it yet.
func cleanLeftovers(stateDir string, shared bool, log *slog.Logger) error {
	return cleanLeftoversAfter(stateDir, shared, log, staleCgroupRetry)
}

// cleanLeftoversAfter is cleanLeftovers with the second cgroup pass after
// retry; zero: no second pass.
func cleanLeftoversAfter(stateDir string, shared bool, log *slog.Logger, retry time.Duration) error {
	var errs []error
	if shared {
		log.Debug("other instances use the state dir: session workspaces are left for a later start", "state_dir", stateDir)
	} else {
		errs = append(errs, removeSessionWorkspaces(filepath.Join(stateDir, "workspaces"), log))
	}
	errs = append(errs, removeDeadSockets(stateDir, log))
	dirs, err := sandbox.CleanupStaleDirs()
	for _, d := range dirs {
		log.Debug("removed a crashed gateway's egress socket dir", "path", d)
	}
	errs = append(errs, err)
	errs = append(errs, removeStaleCgroups(log))
	if retry > 0 {
		time.AfterFunc(retry, func() {
			if err := removeStaleCgroups(log); err != nil {
				log.Warn("removing leftover sandbox cgroups", "err", err)
			}
		})
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing crash leftovers: %w", err)
	}
	return nil
}

// removeStaleCgroups removes the idle cgroups of dead sandboxes; a host
// without cgroups has none.
func removeStaleCgroups(log *slog.Logger) error {
	ids, err := cgroup.CleanupStale()
	for _, id := range ids {
		log.Debug("removed a dead sandbox's cgroup", "sandbox", id)
	}
	if errors.Is(err, cgroup.ErrUnsupported) {
		return nil
	}
	return err
}

// removeSessionWorkspaces removes root/AGENT/SERVER/sessions/*, the
// workspaces of sessions a killed serve left, but for an input overlay
// with changes, which is kept as an ended session's is
// (workspace.ReleaseSession), and the ones kept so already. Only real
// directories are descended into: the walk never leaves root through a
// symlink, whoever planted it.
func removeSessionWorkspaces(root string, log *slog.Logger) error {
	var errs []error
	for _, agent := range subdirs(root, &errs) {
		for _, server := range subdirs(agent, &errs) {
			sessions := filepath.Join(server, "sessions")
			fi, err := os.Lstat(sessions)
			if err != nil || !fi.IsDir() {
				continue
			}
			ents, err := os.ReadDir(sessions)
			if err != nil {
				errs = append(errs, fmt.Errorf("listing session workspaces: %w", err))
				continue
			}
			n, kept := 0, 0
			for _, e := range ents {
				p := filepath.Join(sessions, e.Name())
				switch {
				case !e.IsDir():
					// RemoveAll unlinks a symlink; it does not follow it.
					if err := os.RemoveAll(p); err != nil {
						errs = append(errs, fmt.Errorf("removing session workspace: %w", err))
						continue
					}
					n++
				case workspace.IsEnded(p):
				default:
					if k, _ := workspace.ReleaseSession(p); k {
						kept++
					} else {
						n++
					}
				}
			}
			if n > 0 || kept > 0 {
				log.Info("removed leftover session workspaces", "agent", filepath.Base(agent), "server", filepath.Base(server), "count", n,
					"kept_overlays", kept)
			}
		}
	}
	return errors.Join(errs...)
}

// subdirs lists the real directories in dir (none if dir is missing).
func subdirs(dir string, errs *[]error) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			*errs = append(*errs, fmt.Errorf("listing workspaces: %w", err))
		}
		return nil
	}
	var dirs []string
	for _, e := range ents {
		if e.Type() == fs.ModeDir { // ReadDir's type comes from lstat
			dirs = append(dirs, filepath.Join(dir, e.Name()))
		}
	}
	return dirs
}

// removeDeadSockets removes the unix sockets in stateDir that no process
// listens on (an instance's own are in instances/: instance.RemoveStale).
func removeDeadSockets(stateDir string, log *slog.Logger) error {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return fmt.Errorf("listing state dir: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if e.Type() != fs.ModeSocket {
			continue
		}
		path := filepath.Join(stateDir, e.Name())
		if !socketDead(path) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing stale socket: %w", err))
			continue
		}
		log.Info("removed a crashed gateway's socket", "path", path)
	}
	return errors.Join(errs...)
}

// socketDead reports whether connecting to the socket at path is refused:
// nobody listens on it. Any other outcome leaves it alone.
func socketDead(path string) bool {
	conn, err := instance.Dial(path, time.Second)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
