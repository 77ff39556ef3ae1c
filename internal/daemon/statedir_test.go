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
	c, base, err := LoadConfigOrDefault(path, nil, "pin", nil)
	if err != nil || base != dir || c.Server("s") == nil {
		t.Fatalf("a file: base %q, %v; want %q and its server", base, err, dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	c, base, err = LoadConfigOrDefault("", src, "pin", &stderr)
	if err != nil || base != wd || c.Server("s") == nil || stderr.Len() != 0 {
		t.Fatalf("the default: base %q, %v, note %q; want %q and its server, no note", base, err, stderr.String(), wd)
	}
	// The default where the user wrote a config: a note names it.
	t.Chdir(dir)
	if _, _, err = LoadConfigOrDefault("", src, "update", &stderr); err != nil || stderr.String() != "mcpbox: note: update uses the embedded default, not mcpbox.yaml: mcpbox update --config mcpbox.yaml uses that\n" {
		t.Errorf("the default beside mcpbox.yaml: %v, note %q", err, stderr.String())
	}
	if _, _, err := LoadConfigOrDefault("", []byte("version: 1\nbogus: 1\n"), "pin", nil); err == nil || !strings.Contains(err.Error(), "(embedded default)") {
		t.Errorf("a bad default: %v; want an error naming it", err)
	}
	if _, _, err := LoadConfigOrDefault(filepath.Join(dir, "missing.yaml"), src, "pin", nil); !errors.Is(err, ErrReadingConfig) {
		t.Errorf("a missing file: %v; want ErrReadingConfig", err)
	}
}

// TestLoadConfigEndless: a config path that never ends (/dev/zero) is
// read no further than a config may be, and refused.
func TestLoadConfigEndless(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	if _, err := LoadConfig("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("LoadConfig(/dev/zero): %v, want a refusal", err)
	}
}
