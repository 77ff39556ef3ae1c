package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/specconv"
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
	c, base, err := LoadConfigOrDefault(path, nil, "pin")
	if err != nil || base != dir || c.Server("s") == nil {
		t.Fatalf("a file: base %q, %v; want %q and its server", base, err, dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c, base, err = LoadConfigOrDefault("", src, "pin")
	if err != nil || base != wd || c.Server("s") == nil {
		t.Fatalf("the default: base %q, %v; want %q and its server", base, err, wd)
	}
	// The default where the user wrote a config: refused, naming it (pin
	// --check there passed, having checked the default).
	t.Chdir(dir)
	if _, _, err = LoadConfigOrDefault("", src, "update"); err == nil || err.Error() != "mcpbox.yaml is here: mcpbox update --config mcpbox.yaml uses it (without --config, update would read the embedded default, as serve does)" {
		t.Errorf("the default beside mcpbox.yaml: %v", err)
	}
	if _, _, err := LoadConfigOrDefault("", []byte("version: 1\nbogus: 1\n"), "pin"); err == nil || !strings.Contains(err.Error(), "(embedded default)") {
		t.Errorf("a bad default: %v; want an error naming it", err)
	}
	if _, _, err := LoadConfigOrDefault(filepath.Join(dir, "missing.yaml"), src, "pin"); !errors.Is(err, ErrReadingConfig) {
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

// TestFindStateDirPassesOverRefusedStateDir: in a cloned repository whose
// config names another project's state dir, which serve refuses, the
// admin commands without flags (ps, approve, stop, logs, token rotate)
// do not find that project's state dir either.
func TestFindStateDirPassesOverRefusedStateDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("HOME", filepath.Join(tmp, "home"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	for _, d := range []string{"victim", "repo"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "victim", "mcpbox.yaml"), []byte("version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	victim, err := specconv.ProjectStateDir(filepath.Join(tmp, "victim", "mcpbox.yaml"), filepath.Join(tmp, "victim"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(tmp, "repo")
	cfg := filepath.Join(repo, "mcpbox.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\nstate_dir: "+victim+"\nservers:\n  s: {command: [sh]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := FindStateDir(repo, nil); got == victim {
		t.Errorf("FindStateDir in the repository = %q, %v: the other project's", got, err)
	}
	if got, err := TokenStateDir(repo, c); got == victim {
		t.Errorf("TokenStateDir in the repository (token rotate) = %q, %v: the other project's", got, err)
	}
}
