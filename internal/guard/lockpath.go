package guard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
// does not exist yet starts from a copy of that one and of its kept
// lockfiles (mcpbox.lock.d), so that nothing it pinned is trusted afresh;
// mcpbox.lock stays mcpbox.yaml's. Only a regular file is copied.
func LockPath(configPath, stateDir string) (string, error) {
	path := lockPathOf(configPath, stateDir)
	if configPath == "" {
		return path, nil
	}
	shared := filepath.Join(filepath.Dir(configPath), sharedLock)
	if path == shared {
		return path, nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return path, nil // there already (or unreadable: its use says why)
	}
	if fi, err := os.Lstat(shared); err != nil || !fi.Mode().IsRegular() {
		return path, nil
	}
	// The kept lockfiles first: the lock's existence marks the copy done.
	if err := copyDir(shared+".d", path+".d"); err != nil {
		return "", fmt.Errorf("starting %s from %s: %w", path+".d", shared+".d", err)
	}
	if err := copyNew(shared, path); err != nil {
		return "", fmt.Errorf("starting %s from %s: %w", path, shared, err)
	}
	return path, nil
}

// copyDir copies the regular files of src, if it exists, into dst, each
// unless dst has it already.
func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyNew(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// copyNew copies the regular file src to dst, with its mode, unless dst
// exists (another process copied it meanwhile): written aside and linked
// into place, dst is never seen half written.
func copyNew(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-lock-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(fi.Mode().Perm())
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
