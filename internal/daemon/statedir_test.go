package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadConfigOrDefault: a file's relative paths resolve against its
// directory, the default's against the current one; an unreadable file
// is ErrReadingConfig, and the default's own error names it.
func TestLoadConfigOrDefault(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpbox.yaml")
	src := []byte("version: 1\nservers:\n  s: {command: [sh]}\n")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	c, base, err := LoadConfigOrDefault(path, nil)
	if err != nil || base != dir || c.Server("s") == nil {
		t.Fatalf("a file: base %q, %v; want %q and its server", base, err, dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c, base, err = LoadConfigOrDefault("", src)
	if err != nil || base != wd || c.Server("s") == nil {
		t.Fatalf("the default: base %q, %v; want %q and its server", base, err, wd)
	}
	if _, _, err := LoadConfigOrDefault("", []byte("version: 1\nbogus: 1\n")); err == nil || !strings.Contains(err.Error(), "(embedded default)") {
		t.Errorf("a bad default: %v; want an error naming it", err)
	}
	if _, _, err := LoadConfigOrDefault(filepath.Join(dir, "missing.yaml"), src); !errors.Is(err, ErrReadingConfig) {
		t.Errorf("a missing file: %v; want ErrReadingConfig", err)
	}
}
