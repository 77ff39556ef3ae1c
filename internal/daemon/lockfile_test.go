package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"mcpbox/internal/pkginstall"
)

// TestWriteLockfileRefusesSymlink: the kept npm lockfile goes into the
// lock's .d dir beside the config; a repository that made that dir a
// symlink to a place of the user's gets an error, and nothing is written
// there.
func TestWriteLockfileRefusesSymlink(t *testing.T) {
	store := t.TempDir()
	if err := os.WriteFile(filepath.Join(store, "package-lock.json"), []byte(`{"lockfileVersion":3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := &pkginstall.Package{Pin: pkginstall.Pin{Ecosystem: pkginstall.NPM}, Dir: store}

	project := t.TempDir()
	lock := filepath.Join(project, "mcpbox.lock")
	if err := writeLockfile(lock, "memory", pkg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lockfilePath(lock, "memory")); err != nil {
		t.Fatalf("the lockfile was not kept: %v", err)
	}

	hostile := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(hostile, "dev.lock.d")); err != nil {
		t.Fatal(err)
	}
	if err := writeLockfile(filepath.Join(hostile, "dev.lock"), "memory", pkg); err == nil {
		t.Error("a lockfile was kept through a symlinked dev.lock.d")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside the project: %v", entries)
	}
}
