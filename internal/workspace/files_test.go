//go:build linux

package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestFiles: regular files only, never through a symlink; HashFile hashes
// the file that was met and nothing swapped in for it.
func TestFiles(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a.txt"), "alpha", 0o644)
	write(t, filepath.Join(root, "d", "b.txt"), "beta", 0o644)
	symlink(t, "/etc", filepath.Join(root, "etc"))
	symlink(t, "/etc/passwd", filepath.Join(root, "passwd"))
	var got []FileInfo
	if err := Files(root, func(fi FileInfo) bool { got = append(got, fi); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Rel != "a.txt" || got[1].Rel != "d/b.txt" || got[1].Size != 4 {
		t.Fatalf("files %+v", got)
	}
	sum := sha256.Sum256([]byte("beta"))
	if h, err := HashFile(root, got[1], 1<<20); err != nil || h != hex.EncodeToString(sum[:]) {
		t.Fatalf("hash %q, %v", h, err)
	}
	// Swapped for another file (a new inode), or for a symlink: no hash.
	if err := os.Remove(filepath.Join(root, "d", "b.txt")); err != nil {
		t.Fatal(err)
	}
	symlink(t, "/etc/passwd", filepath.Join(root, "d", "b.txt"))
	if h, _ := HashFile(root, got[1], 1<<20); h != "" {
		t.Fatalf("hashed a symlink swapped in: %q", h)
	}
	if h, _ := HashFile(root, got[0], 2); h != "" {
		t.Fatalf("hashed a file over the limit: %q", h)
	}
	n := 0
	Files(root, func(FileInfo) bool { n++; return false })
	if n != 1 {
		t.Fatalf("the walk went on after fn returned false (%d calls)", n)
	}
}
