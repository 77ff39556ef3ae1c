package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/bearer"
)

func TestTokenRotateCommand(t *testing.T) {
	dir := t.TempDir()
	old, err := bearer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("token", "rotate", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("token rotate: exit %d: %s", code, errOut)
	}
	tok := strings.TrimSpace(out)
	if kept, err := bearer.Read(dir); err != nil || kept != tok || tok == old {
		t.Fatalf("token rotate printed %q; file holds %q (%v); old %q", tok, kept, err, old)
	}
	if !strings.Contains(errOut, bearer.Path(dir)) {
		t.Errorf("token rotate does not say where the token is: %s", errOut)
	}

	// A config with clients keeps its tokens in the config.
	cfg := filepath.Join(t.TempDir(), "mcpbox.yaml")
	os.WriteFile(cfg, []byte("version: 1\nstate_dir: "+dir+"\nclients: [{name: a, token: {from: env:X}}]\nservers: {s: {command: [x], tools: {allow: ['*']}}}\n"), 0o600)
	if code, _, errOut := runCLI("token", "rotate", "--config", cfg); code != exitUsage || !strings.Contains(errOut, "has clients") {
		t.Errorf("token rotate on a config with clients: exit %d: %s", code, errOut)
	}
	if kept, _ := bearer.Read(dir); kept != tok {
		t.Errorf("token rotate on a config with clients changed the token file")
	}
	for _, args := range [][]string{{"token"}, {"token", "renew"}, {"token", "rotate", "extra", "--state-dir", dir}} {
		if code, _, _ := runCLI(args...); code != exitUsage {
			t.Errorf("mcpbox %v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestTokenRotateRefusesOthersDir: a state dir another user could write
// in is not one to keep a token in.
func TestTokenRotateRefusesOthersDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("token", "rotate", "--state-dir", dir); code != 1 || !strings.Contains(errOut, "writable by others") {
		t.Errorf("token rotate in a world-writable dir: exit %d: %s", code, errOut)
	}
	if _, err := os.Lstat(bearer.Path(dir)); err == nil {
		t.Error("token rotate wrote a token into a world-writable dir")
	}
}

// TestLoginStatusNoOAuth: a config whose servers have no oauth says so on
// stderr rather than printing nothing, and exits 0.
func TestLoginStatusNoOAuth(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcpbox.yaml")
	yaml := "version: 1\nservers:\n  legacy:\n    url: http://127.0.0.1:9/sse\n    transport: sse\n    tools: {allow: [\"*\"]}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("login", "--status", "--config", cfg)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "no remote server (url) of the config has oauth") {
		t.Fatalf("login --status = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
