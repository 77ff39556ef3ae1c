package guard

import (
	"os"
	"strings"
	"testing"
)

// TestStateDirOwned: a state dir writable by others, or another user's,
// is refused (they could swap the audit, the pins, the admin socket).
func TestStateDirOwned(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := StateDirOwned(dir); err != nil {
		t.Fatalf("own dir: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := StateDirOwned(dir); err == nil {
		t.Fatal("a world-writable state dir was accepted")
	}
	os.Chmod(dir, 0o700)
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give the dir to another user")
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := StateDirOwned(dir); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("another user's state dir: %v", err)
	}
}
