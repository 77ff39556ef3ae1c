package guard

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLockPath: each config has its own lock beside it, NAME.lock, and
// the embedded default one in its state dir. A config whose lock does not
// exist yet starts from a copy of the directory's mcpbox.lock and its
// kept lockfiles, which every config there shared before; once, never
// over a lock of its own, and never from a symlink.
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
	write("mcpbox.lock.d/srv.package-lock.json", "kept lockfile", 0o644)
	if got := lockPath("mcpbox.yaml"); got != "mcpbox.lock" {
		t.Errorf("lock of mcpbox.yaml: %q", got)
	}
	if got := lockPath("other.yaml"); got != "other.lock" {
		t.Errorf("lock of other.yaml: %q", got)
	}
	if read("other.lock") != "shared pins" || read("other.lock.d/srv.package-lock.json") != "kept lockfile" || read("mcpbox.lock") != "shared pins" {
		t.Error("other.lock was not started from mcpbox.lock and its lockfiles, or mcpbox.lock changed")
	}
	if fi, err := os.Stat(filepath.Join(dir, "other.lock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("other.lock's mode: %v, %v; want mcpbox.lock's 0600", fi.Mode(), err)
	}
	write("other.lock", "its own pins", 0o600)
	lockPath("other.yaml")
	if read("other.lock") != "its own pins" {
		t.Error("a lock of its own was overwritten")
	}

	if got := lockPath("pins.lock"); got != "pins.lock.lock" {
		t.Errorf("lock of a config named pins.lock: %q, want it beside, not it", got)
	}

	os.Remove(filepath.Join(dir, "mcpbox.lock"))
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "mcpbox.lock")); err != nil {
		t.Fatal(err)
	}
	lockPath("third.yaml")
	if _, err := os.Lstat(filepath.Join(dir, "third.lock")); !os.IsNotExist(err) {
		t.Errorf("a lock started from a symlinked mcpbox.lock: %v", err)
	}
}
