package specconv

// What a sandbox of a config must not reach: mcpbox's state dir, and the
// files that decide what servers may do (lock file, config, audit copy).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/instance"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/workspace"
)

// checkReach refuses a spec that would show o.StateDir or whose writable
// mounts hold one of o.Protected.
func checkReach(spec *sandbox.Spec, o Options) error {
	if o.StateDir == "" {
		return errors.New("no state dir to keep out of the sandbox")
	}
	// The home first: a mount of it also shows the state dir, and
	// moving state_dir away, as that error says, would not help.
	if err := hideHome(spec); err != nil {
		return err
	}
	if err := hideStateDir(spec, o.StateDir); err != nil {
		return err
	}
	return protectFiles(spec, o.Protected)
}

// hideHome refuses a spec whose input, output or a mount is the user's
// home dir or holds it (~, /home, /), or that would show mcpbox's state
// root: with state_dir set elsewhere such a mount still showed ~/.ssh and
// every other project's state dir (its bearer token, its dashboard
// secret). A dir inside the home dir, ~/.ssh included, is the config's
// own choice (an output there is checked by workspace.Protected).
func hideHome(spec *sandbox.Spec) error {
	sources := []string{spec.Input, spec.Output}
	for _, m := range spec.Mounts {
		sources = append(sources, m.Source)
	}
	home := realHome()
	root, err := instance.Root()
	if err == nil {
		root = workspace.ResolveExisting(root)
	}
	for _, src := range sources {
		switch {
		case src == "":
		case home != "" && within(home, src):
			return fmt.Errorf("%s is or holds your home directory %s: the sandbox would see ~/.ssh, ~/.aws and the like; mount the directories the server needs instead", src, home)
		case root != "" && (within(root, src) || within(src, root)):
			return fmt.Errorf("%s would show mcpbox's state root %s (every project's state: bearer tokens, dashboard secrets, audit) in the sandbox; mount a directory that does not hold it", src, root)
		}
	}
	return nil
}

// realHome is the user's home dir with symlinks resolved, or "" when
// there is none to protect (unknown, or / in a container without one).
func realHome() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	if home, err = filepath.EvalSymlinks(home); err != nil || home == "/" {
		return ""
	}
	return home
}

// InputHidesState refuses server s when its input shows the user's home
// dir, credentials and all (serve started in $HOME or /), or the state
// dir, before serverSpec makes its output dir: the refusal must leave
// nothing behind (and before a package server's install: nothing is
// downloaded for a server that cannot start). checkReach checks the
// whole spec after.
func InputHidesState(s *config.Server, o Options) error {
	in := s.Filesystem.Input
	if in == nil || o.StateDir == "" {
		return nil
	}
	src, err := hostSourceDir(o.base(), "", in.Source, 0)
	if err != nil {
		return nil // serverSpec says what is wrong with it
	}
	if home := realHome(); home != "" && within(home, src) {
		return fmt.Errorf("server %s: its input %s is or holds your home directory %s: the sandbox would see ~/.ssh, ~/.aws and the like; run mcpbox from a project directory (the embedded default serves the current one), or set filesystem.input.source to one", s.Name, src, home)
	}
	if err := hideStateDir(&sandbox.Spec{Input: src}, o.StateDir); err != nil {
		return fmt.Errorf("server %s: %w", s.Name, err)
	}
	return nil
}

// hideStateDir refuses a spec that would show the state dir (other agents'
// workspaces, the admin socket) inside the sandbox, or put a host dir of
// the sandbox inside it.
func hideStateDir(spec *sandbox.Spec, stateDir string) error {
	// Not made yet before a first install (pin on a fresh machine): where
	// it will be.
	state := workspace.ResolveExisting(stateDir)
	sources := []string{spec.Input, spec.Output}
	for _, m := range spec.Mounts {
		sources = append(sources, m.Source)
	}
	for _, src := range sources {
		if src != "" && (within(state, src) || within(src, state)) {
			return fmt.Errorf("%s would show mcpbox's state dir %s (other agents' workspaces, the admin socket) in the sandbox; run it from another directory or set state_dir elsewhere", src, state)
		}
	}
	return nil
}

// protectFiles refuses a spec whose writable mounts (output, rw mounts)
// contain one of paths: a sandbox could rewrite the lock file (and pin
// its own next definitions), the config or the audit's JSONL copy.
func protectFiles(spec *sandbox.Spec, paths []string) error {
	var writable []string
	if spec.Output != "" {
		writable = append(writable, spec.Output)
	}
	for _, m := range spec.Mounts {
		if m.Writable {
			writable = append(writable, m.Source)
		}
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		real := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			real = r
		} else if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			real = filepath.Join(r, filepath.Base(p))
		}
		for _, w := range writable {
			if within(real, w) {
				return fmt.Errorf("the writable mount %s contains %s (the lock file, config or audit copy): a server could rewrite it; keep them outside what servers may write", w, p)
			}
		}
	}
	return nil
}

// ProtectedFiles are the host paths of config c (read from configPath,
// "" for the embedded default; relative paths against base) that no
// sandbox may write: the dir of the lock file at lockPath (the pins), the
// config (the policy) and the audit's JSONL copy. They go in
// Options.Protected of every command that starts c's servers.
func ProtectedFiles(c *config.Config, base, configPath, lockPath string) []string {
	jsonl := c.Audit.JSONL
	if jsonl != "" {
		jsonl = Resolve(base, jsonl)
	}
	paths := []string{filepath.Dir(lockPath), jsonl}
	if configPath != "" {
		paths = append(paths, configPath)
	}
	return paths
}

// StateDir is the config's state dir, resolved against the config file's
// directory (base), made absolute (the sandbox setup runs elsewhere), and
// made if missing; flag (--state-dir) overrides it. With neither, the
// project's own state dir (instance.ProjectStateDir: keyed by configPath,
// or by base for the embedded default).
func StateDir(c *config.Config, configPath, base, flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = c.StateDir
	}
	var err error
	if dir == "" {
		dir, err = ProjectStateDir(configPath, base)
	} else {
		dir, err = filepath.Abs(Resolve(base, dir))
	}
	if err != nil {
		return "", fmt.Errorf("no state dir: set state_dir or --state-dir (%w)", err)
	}
	if flag == "" && c.StateDir != "" {
		if err := notInStateRoot(dir); err != nil {
			return "", err
		}
		// A config's state_dir in its own dir is a project's name: a
		// symlink there must not choose where workspaces and the audit go.
		absBase, err1 := filepath.Abs(base)
		absDir, err2 := filepath.Abs(dir)
		if rel, err := filepath.Rel(absBase, absDir); err == nil && err1 == nil && err2 == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			real, err := workspace.MakeHostDir(absBase, rel, 0o700)
			if err != nil {
				return "", fmt.Errorf("creating state dir: %w", err)
			}
			return real, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating state dir: %w", err)
	}
	return dir, nil
}

// CheckStateDir is StateDir's refusal of c's state_dir, without making
// anything: for policy check, which says serve will refuse the config.
func CheckStateDir(c *config.Config, base string) error {
	if c.StateDir == "" {
		return nil
	}
	dir, err := filepath.Abs(Resolve(base, c.StateDir))
	if err != nil {
		return err
	}
	return notInStateRoot(dir)
}

// notInStateRoot refuses a config's state_dir in the places under
// mcpbox's state root where other projects' state dirs are (projects/,
// keyed by a name that can be worked out, and the registry statedirs/): a
// cloned repository's config naming another project's would share that
// project's workspaces, audit log, token and approvals. Both roots a
// serve of this user may use are checked, $XDG_STATE_HOME/mcpbox and
// ~/.local/state/mcpbox (a client started from the desktop often lacks
// XDG_STATE_HOME). The root itself and other dirs in it stay allowed (the
// design's example config names the root). The path is checked as
// written and as the real path of the part of it that exists.
// --state-dir, the user's own choice, may name any.
func notInStateRoot(dir string) error {
	var roots []string
	if root, err := instance.Root(); err == nil {
		roots = append(roots, root)
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		roots = append(roots, filepath.Join(home, ".local", "state", "mcpbox"))
	}
	spellings := []string{filepath.Clean(dir), workspace.ResolveExisting(dir)}
	for _, root := range roots {
		for _, sub := range []string{"projects", "statedirs"} {
			place := filepath.Join(root, sub)
			realPlace := workspace.ResolveExisting(place)
			if slices.ContainsFunc(spellings, func(p string) bool { return within(p, place) || within(p, realPlace) }) {
				return fmt.Errorf("state_dir %s is in %s, where mcpbox keeps other projects' state dirs: a config may not name one (it would share that project's workspaces, audit log and approvals); remove state_dir, or pass --state-dir DIR", dir, place)
			}
		}
	}
	return nil
}

// ConfigStateDir is the state dir of the gateway that serves the config
// c read from configPath, for commands that talk to it: its state_dir
// (made if missing, as StateDir does), or the project's own, which is
// made by its serve and not by looking.
func ConfigStateDir(c *config.Config, configPath string) (string, error) {
	if c.StateDir != "" {
		return StateDir(c, configPath, filepath.Dir(configPath), "")
	}
	return ProjectStateDir(configPath, filepath.Dir(configPath))
}

// ProjectStateDir is the state dir of a project whose config names none
// (keyed by configPath, or by base for the embedded default): see package
// instance.
func ProjectStateDir(configPath, base string) (string, error) {
	root, err := instance.Root()
	if err != nil {
		return "", err
	}
	return instance.ProjectStateDir(root, configPath, base)
}

// within reports whether clean absolute path a is b or lies beneath it; b
// may be /, which holds every path.
func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/")
}
