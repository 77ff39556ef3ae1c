package audit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenRefusesLinks: a store, head or SQLite side file planted as a
// link (a state dir a cloned repository shaped) is refused, and the file
// it points to is left as it was: before, the head was written through
// the link, and a -shm link failed as "unable to open database file"
// after audit.db had been made.
func TestOpenRefusesLinks(t *testing.T) {
	for _, name := range []string{"audit.db", "audit.db.head", "audit.db-wal", "audit.db-shm", "audit.db-journal"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if name != "audit.db" {
				if err := os.WriteFile(filepath.Join(dir, "audit.db"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			s, err := Open(Options{Path: filepath.Join(dir, "audit.db")})
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "is a symlink") {
				t.Errorf("Open with %s a link: %v, want a refusal", name, err)
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
				t.Errorf("the link's target now holds %q", b)
			}
		})
	}
}

// TestOpenRefusesFIFO: a store or side file that is a FIFO is refused
// with its name, not a "disk I/O error".
func TestOpenRefusesFIFO(t *testing.T) {
	for _, name := range []string{"audit.db", "audit.db-wal"} {
		dir := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Options{Path: filepath.Join(dir, "audit.db")})
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), name+" is not a regular file") {
			t.Errorf("Open with %s a FIFO: %v, want a refusal naming it", name, err)
		}
	}
}
