package guard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockPath: each config has its own lock beside it, NAME.lock, and
// the embedded default one in its state dir. A config whose lock does not
// exist yet starts from a copy of the directory's mcpbox.lock and its
// kept lockfiles, which every config there shared before; once, never
// over a lock of its own, and never through a symlink.
func TestLockPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	lockPath := func(config string) string {
		t.Helper()
		got, err := LockPath(filepath.Join(dir, config), "/state")
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, got)
		return rel
	}

	if got, err := LockPath("", "/state"); err != nil || got != "/state/mcpbox.lock" {
		t.Errorf("the embedded default's lock: %q, %v", got, err)
	}
	if got := lockPath("other.yaml"); got != "other.lock" {
		t.Errorf("lock of other.yaml: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "other.lock")); !os.IsNotExist(err) {
		t.Errorf("a lock made with nothing to start it from: %v", err)
	}

	write("mcpbox.lock", "shared pins", 0o600)
	write("mcpbox.lock.d/srv.package-lock.json", "kept lockfile", 0o755)
	write("mcpbox.lock.d/notes.txt", "not a lockfile", 0o644)
	// A command that writes no pins reads mcpbox.lock's and copies none.
	if got, err := LockToRead(filepath.Join(dir, "check.yaml"), "/state"); err != nil || got != filepath.Join(dir, "mcpbox.lock") {
		t.Errorf("LockToRead of check.yaml: %q, %v; want mcpbox.lock", got, err)
	}
	for _, name := range []string{"check.lock", "check.lock.d"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("LockToRead made %s: %v", name, err)
		}
	}
	if got := lockPath("mcpbox.yaml"); got != "mcpbox.lock" {
		t.Errorf("lock of mcpbox.yaml: %q", got)
	}
	if got := lockPath("other.yaml"); got != "other.lock" {
		t.Errorf("lock of other.yaml: %q", got)
	}
	if read("other.lock") != "shared pins" || read("other.lock.d/srv.package-lock.json") != "kept lockfile" || read("mcpbox.lock") != "shared pins" {
		t.Error("other.lock was not started from mcpbox.lock and its lockfiles, or mcpbox.lock changed")
	}
	if _, err := os.Lstat(filepath.Join(dir, "other.lock.d", "notes.txt")); !os.IsNotExist(err) {
		t.Errorf("a file that is no lockfile was copied: %v", err)
	}
	for _, name := range []string{"other.lock", "other.lock.d/srv.package-lock.json"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, %v; want 0644, whatever the original's", name, fi.Mode(), err)
		}
	}
	if got, err := LockToRead(filepath.Join(dir, "other.yaml"), "/state"); err != nil || got != filepath.Join(dir, "other.lock") {
		t.Errorf("LockToRead of other.yaml once it has its own: %q, %v", got, err)
	}
	write("other.lock", "its own pins", 0o600)
	lockPath("other.yaml")
	if read("other.lock") != "its own pins" {
		t.Error("a lock of its own was overwritten")
	}

	if got := lockPath("pins.lock"); got != "pins.lock.lock" {
		t.Errorf("lock of a config named pins.lock: %q, want it beside, not it", got)
	}

	// A hostile repository: a symlinked lockfile dir on either side is
	// refused, and nothing is written or read outside.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "dev.lock.d")); err != nil {
		t.Fatal(err)
	}
	if _, err := LockPath(filepath.Join(dir, "dev.yaml"), "/state"); err == nil {
		t.Error("a symlinked dev.lock.d was written through")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("files written outside the project: %v", entries)
	}
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "id.package-lock.json"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "mcpbox.lock.d"))
	if err := os.Symlink(secrets, filepath.Join(dir, "mcpbox.lock.d")); err != nil {
		t.Fatal(err)
	}
	if _, err := LockPath(filepath.Join(dir, "fourth.yaml"), "/state"); err == nil {
		t.Error("a symlinked mcpbox.lock.d was copied from")
	}
	if _, err := os.Lstat(filepath.Join(dir, "fourth.lock.d", "id.package-lock.json")); !os.IsNotExist(err) {
		t.Errorf("a file read through a symlink was copied into the project: %v", err)
	}

	// A symlinked mcpbox.lock is an error, not a start with no pins.
	os.Remove(filepath.Join(dir, "mcpbox.lock.d"))
	os.Remove(filepath.Join(dir, "mcpbox.lock"))
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "mcpbox.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := LockPath(filepath.Join(dir, "third.yaml"), "/state"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a symlinked mcpbox.lock: %v, want an error", err)
	}
	if _, err := LockToRead(filepath.Join(dir, "third.yaml"), "/state"); err == nil {
		t.Error("LockToRead read through a symlinked mcpbox.lock")
	}
	if _, err := os.Lstat(filepath.Join(dir, "third.lock")); !os.IsNotExist(err) {
		t.Errorf("a lock started from a symlinked mcpbox.lock: %v", err)
	}
}
