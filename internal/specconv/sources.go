package specconv

// Host paths of a sandbox's mounts (input, output, mounts), from config
// sources and exec flags.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/instance"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/workspace"
)

// HostFile is the host path of a file mcpbox appends to, named p in a
// config at base (the audit's JSONL copy): its directory is made (mode
// 0700) and walked as hostSource walks a dir mcpbox creates, so that a
// symlink the project ships cannot choose where it is written. The
// caller opens the file itself without following a link (O_NOFOLLOW).
//
// The records hold strings a client or a server chooses, so the file
// must stay clear of the places a writable mount must (a dir whose files
// a shell sources, ~/.bashrc.d; the credential dirs; a .git dir; system
// dirs), checked before its dir is made and again at its real path.
func HostFile(base, p string) (string, error) {
	abs, err := filepath.Abs(Resolve(base, p))
	if err != nil {
		return "", err
	}
	home, _ := os.UserHomeDir()
	project, _ := filepath.Abs(base)
	protected := workspace.Protected{Home: home, Project: project}
	if err := protected.Check(abs); err != nil {
		return "", err
	}
	dir, err := hostSource(base, "", filepath.Dir(abs), 0o700)
	if err != nil {
		return "", err
	}
	real := filepath.Join(dir, filepath.Base(abs))
	return real, protected.Check(real)
}

// hostSource resolves the source p (as written in a config at base, or
// given as a flag: see flagBase) to a real host path. A name
// beneath base or beneath the input in (a real path, or "") is the
// project's: it is walked without following symlinks, so a symlink the
// project ships cannot point the mount elsewhere on the host. Another name
// is the user's own and its symlinks are followed, except in a dir mcpbox
// creates (with mode perm, if not 0) and writes: that is walked without
// symlinks from the home dir (for a path in it) or from /.
func hostSource(base, in, p string, perm os.FileMode) (string, error) {
	create := perm != 0
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	abs, err := filepath.Abs(Resolve(base, p))
	if err != nil {
		return "", err
	}
	roots := []string{in, base}
	if create {
		home, _ := os.UserHomeDir()
		roots = append(roots, home, "/")
	}
	for _, root := range roots {
		if root == "" {
			continue
		}
		if root, err = filepath.Abs(root); err != nil {
			return "", err
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if create {
			return workspace.MakeHostDir(root, rel, perm)
		}
		return workspace.HostPath(root, rel)
	}
	return filepath.EvalSymlinks(abs)
}

// flagBase is the base of a path given as a flag: a relative name is
// walked from the working dir (which may be a project's), an absolute
// one the user typed has no base.
func flagBase(p string) string {
	if filepath.IsAbs(p) {
		return ""
	}
	return "."
}

// ErrNotDir: a source that must be a directory (an input, an output) is
// something else. Like a missing one, the host's state rather than the
// config's: serve parks the server as unavailable, and a later session
// tries it again.
var ErrNotDir = errors.New("not a directory")

// hostSourceDir is hostSource for a source that must be a directory.
func hostSourceDir(base, in, p string, perm os.FileMode) (string, error) {
	real, err := hostSource(base, in, p, perm)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(real); err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s is %w", p, ErrNotDir)
	}
	return real, nil
}

// protectedPlaces are the host places a writable source of a sandbox with
// input in, of a config at base (for flags: "."), must stay clear of;
// stateDir is the config's (or the default) state dir, "" if unknown.
func protectedPlaces(base, in, stateDir string) workspace.Protected {
	home, _ := os.UserHomeDir()
	root, _ := instance.Root()
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	}
	return workspace.Protected{Home: home, StateDir: stateDir, Root: root, Input: in, Project: base}
}

// configStateDir is the state dir c names, or the root of every
// project's default one (instance.Root), without making it: the state
// dir actually used (flags included) is checked by hideStateDir.
func configStateDir(c *config.Config, base string) string {
	if c.StateDir != "" {
		// Absolute, as StateDir makes it: the places it is compared with are.
		if abs, err := filepath.Abs(Resolve(base, c.StateDir)); err == nil {
			return abs
		}
		return Resolve(base, c.StateDir)
	}
	if root, err := instance.Root(); err == nil {
		return root
	}
	return ""
}

// outputDir makes the writable dir p (hostSource, missing dirs made with
// perm) and returns its real path; a protected place is refused before
// anything is made, and again once resolved.
func outputDir(base, in, p string, perm os.FileMode, protected workspace.Protected) (string, error) {
	abs, err := filepath.Abs(Resolve(base, p))
	if err != nil {
		return "", err
	}
	if err := protected.Check(abs); err != nil {
		return "", err
	}
	real, err := hostSourceDir(base, in, p, perm)
	if err != nil {
		return "", err
	}
	return real, protected.Check(real)
}

// checkWritten checks the writable source p of a config at base both as
// written and at its real path real.
func checkWritten(protected workspace.Protected, base, p, real string) error {
	if abs, err := filepath.Abs(Resolve(base, p)); err == nil {
		if err := protected.Check(abs); err != nil {
			return err
		}
	}
	return protected.Check(real)
}

// Template resolves the workspace template p of a config at base whose
// server has the input in (a real path, or "") and whose state dir is
// stateDir, like a mount source: a project's symlink must not seed a
// workspace from, say, ~/.ssh. Its files are copied where the server
// reads them, so it is refused where a mount is: the home dir or a dir
// holding it, mcpbox's state root or the state dir. A missing template is
// refused: one made later, by a sandbox with a writable mount above it,
// could be a link to the home dir, unchecked.
func Template(base, in, stateDir, p string) (string, error) {
	real, err := hostSource(base, in, p, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist: a template is checked when its server is set up", p)
	}
	if err != nil {
		return "", err
	}
	spec := &sandbox.Spec{Input: real}
	if err := hideHome(spec); err != nil {
		return "", err
	}
	if stateDir != "" {
		if err := hideStateDir(spec, stateDir); err != nil {
			return "", err
		}
	}
	return real, nil
}

// ArtifactsDir makes the artifacts dir p of a config at o.Base whose
// server has the input in (a real path, or "") and returns its real path.
// mcpbox writes there, so it must stay clear of the places a writable
// source must (the home dir, /etc, the state dir's parents, the input).
func ArtifactsDir(o Options, in, p string) (string, error) {
	return outputDir(o.base(), in, p, 0o700, protectedPlaces(o.base(), in, o.StateDir))
}

// HostPath is the real host path of the source p of a config at base
// whose server has the input in (a real path, or ""), walked as a mount
// source is: a project's symlink fails with workspace.ErrSymlink. Nothing
// is made.
func HostPath(base, in, p string) (string, error) {
	return hostSource(base, in, p, 0)
}

// Resolve is the host path p of a config at base: "~/" is the home dir, a
// relative path is joined to base. Symlinks are left as they are.
func Resolve(base, p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

// MountSource checks that the source of mount m of a config at base,
// whose server has the input in (a real path, or ""), is there to be
// mounted, walked as the sandbox's set-up walks it: a missing source
// fails with fs.ErrNotExist, a project's symlink with
// workspace.ErrSymlink. Nothing is made.
func MountSource(base, in string, m config.Mount) error {
	_, err := hostSource(base, in, m.Source, 0)
	return err
}

// InputDir is the host dir server s's filesystem.input shows, its paths
// resolved against base as for its sandbox; "" if it has no input.
func InputDir(s *config.Server, base string) (string, error) {
	if s.Filesystem.Input == nil {
		return "", nil
	}
	return hostSourceDir(base, "", s.Filesystem.Input.Source, 0)
}
