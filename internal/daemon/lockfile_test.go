package daemon

import (
	"os"
	"path/filepath"
	"syscall"
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

// TestReadKeptLockfileRefusesLinks: a kept lockfile is read only as a
// regular file in a real .d dir: a repository's link to a file of the
// user's (or a dir link) is refused before any byte is read, and a fifo
// does not hang the start.
func TestReadKeptLockfileRefusesLinks(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "id_rsa")
	if err := os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	lock := filepath.Join(project, "mcpbox.lock")
	if err := os.Mkdir(lock+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lockfilePath(lock, "ok"), []byte(`{"lockfileVersion":3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := readKeptLockfile(lockfilePath(lock, "ok")); err != nil || string(data) != `{"lockfileVersion":3}` {
		t.Errorf("a plain kept lockfile: %q, %v", data, err)
	}
	if err := os.Symlink(secret, lockfilePath(lock, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(lockfilePath(lock, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, server := range []string{"linked", "fifo"} {
		if data, err := readKeptLockfile(lockfilePath(lock, server)); err == nil {
			t.Errorf("kept lockfile of %s: read %q, want it refused", server, data)
		}
	}

	hostile := t.TempDir()
	keys := t.TempDir()
	if err := os.WriteFile(filepath.Join(keys, "memory.package-lock.json"), []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(keys, filepath.Join(hostile, "mcpbox.lock.d")); err != nil {
		t.Fatal(err)
	}
	if data, err := readKeptLockfile(lockfilePath(filepath.Join(hostile, "mcpbox.lock"), "memory")); err == nil {
		t.Errorf("a kept lockfile through a linked .d dir: read %q, want it refused", data)
	}
}
