package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenRefusesLinks: a store or head file planted as a link (a state
// dir a cloned repository shaped) is refused, and the file it points to
// is left as it was: before, the head was written through the link.
func TestOpenRefusesLinks(t *testing.T) {
	for _, name := range []string{"audit.db", "audit.db.head"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if name == "audit.db.head" {
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
