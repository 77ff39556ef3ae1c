package guard

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// sharedLock is the lock file's name beside mcpbox.yaml, which every
// config in a directory shared before each got its own.
const sharedLock = "mcpbox.lock"

// lockPathOf is where LockPath keeps the pins of the config at
// configPath: NAME.lock beside NAME.yaml (mcpbox.lock beside
// mcpbox.yaml), or mcpbox.lock in stateDir for the embedded default.
func lockPathOf(configPath, stateDir string) string {
	if configPath == "" {
		return filepath.Join(stateDir, sharedLock)
	}
	base := filepath.Base(configPath)
	lock := filepath.Join(filepath.Dir(configPath), strings.TrimSuffix(base, filepath.Ext(base))+".lock")
	if lock == filepath.Clean(configPath) { // a config named NAME.lock
		lock += ".lock"
	}
	return lock
}

// LockPath is the lock file of the pins of the config at configPath
// (configPath "": the embedded default, whose lock is in stateDir). Each
// config has its own, NAME.lock beside NAME.yaml, as it has its own state
// dir: two configs in one directory that share a server name must not
// share its pins.
//
// Until each config had its own, every config in a directory used the
// directory's mcpbox.lock. A config other than mcpbox.yaml whose own lock
// does not exist yet starts from a copy of that one and of its kept npm
// lockfiles (mcpbox.lock.d/*.package-lock.json), so that nothing it
// pinned is trusted afresh; mcpbox.lock stays mcpbox.yaml's. The project
// directory is the repository's, which may be hostile: no symlink is
// followed on either side (a lock that is one is an error, not a fresh
// start), and only regular files are copied, mode 0644.
func LockPath(configPath, stateDir string) (string, error) {
	path, from, err := lockSource(configPath, stateDir)
	if err != nil || from == "" {
		return path, err
	}
	// The kept lockfiles first: the lock's existence marks the copy done.
	if err := copyLockfiles(from+".d", path+".d"); err != nil {
		return "", fmt.Errorf("starting %s from %s: %w", path+".d", from+".d", err)
	}
	if err := copyNew(from, path); err != nil {
		return "", fmt.Errorf("starting %s from %s: %w", path, from, err)
	}
	return path, nil
}

// LockToRead is the lock file that holds the pins of the config at
// configPath for a command that writes none (pin --check, update
// --check): LockPath's, or, while that does not exist yet, the one
// LockPath would start it from, which it leaves uncopied.
func LockToRead(configPath, stateDir string) (string, error) {
	path, from, err := lockSource(configPath, stateDir)
	if from != "" {
		return from, err
	}
	return path, err
}

// lockSource is the config's lock file and, if that does not exist yet
// and the directory's shared one does, the shared one to start it from.
func lockSource(configPath, stateDir string) (path, from string, err error) {
	path = lockPathOf(configPath, stateDir)
	if configPath == "" {
		return path, "", nil
	}
	shared := filepath.Join(filepath.Dir(configPath), sharedLock)
	if path == shared {
		return path, "", nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return path, "", nil // there already (or unreadable: its use says why)
	}
	fi, err := os.Lstat(shared)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, "", nil // nothing pinned yet
	case err != nil:
		return "", "", err
	case !fi.Mode().IsRegular():
		return "", "", fmt.Errorf("%s is not a regular file (a symlink?), so %s cannot start from its pins: replace it with the file, or remove it to pin afresh", shared, path)
	}
	return path, shared, nil
}

// copyLockfiles copies the npm lockfiles of src, if it is a directory,
// into dst, each unless dst has it already. Neither may be a symlink.
func copyLockfiles(src, dst string) error {
	fi, err := os.Lstat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (a symlink?)", src)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if fi, err := os.Lstat(dst); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symlink?)", dst)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".package-lock.json") {
			continue
		}
		if err := copyNew(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// copyNew copies the regular file src (not through a symlink) to dst,
// mode 0644, unless dst exists (another process copied it meanwhile):
// written aside and linked into place, dst is never seen half written.
func copyNew(src, dst string) error {
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-lock-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, f)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), dst); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
