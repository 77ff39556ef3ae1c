package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeDefaultLoadError: when the embedded default does not load,
// serve says why and exits 2; the working dir's lookup used to replace
// that error with its own nil, and serve went on with no config.
func TestServeDefaultLoadError(t *testing.T) {
	saved := defaultConfig
	defaultConfig = []byte("version: 1\nservers: {}\nbogus: 1\n")
	t.Cleanup(func() { defaultConfig = saved })
	code, _, errs := runCLI("serve", "--stdio", "--state-dir", t.TempDir())
	if code != exitUsage || !strings.Contains(errs, "(embedded default)") || !strings.Contains(errs, "bogus") {
		t.Fatalf("serve with a broken default: exit %d, stderr %q; want exit %d naming the error", code, errs, exitUsage)
	}
}

// TestServeNamesTheUnusedProjectConfig: serve without --config serves the
// embedded default even where the user wrote an mcpbox.yaml (which the
// admin commands do read), and says so, naming the flag that serves it.
// (--metrics-addr on a non-loopback address stops serve before it serves.)
func TestServeNamesTheUnusedProjectConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	args := []string{"serve", "--allow-degraded", "--metrics-addr", "192.0.2.1:9"}
	if _, _, errs := runCLI(args...); strings.Contains(errs, "note: serving the embedded default") {
		t.Fatalf("a directory without a config got the note:\n%s", errs)
	}
	if err := os.WriteFile(filepath.Join(dir, "mcpbox.yaml"), []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, errs := runCLI(args...)
	if !strings.Contains(errs, "note: serving the embedded default, not mcpbox.yaml: mcpbox serve --config mcpbox.yaml serves that") {
		t.Fatalf("serve beside an mcpbox.yaml, stderr:\n%s", errs)
	}
}

// TestSecretsReadsTheProjectConfig: mcpbox secrets with no FILE, run
// beside an mcpbox.yaml, lists that config's references, as the other
// admin commands find the project; elsewhere it asks for the FILE.
func TestSecretsReadsTheProjectConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if code, _, errs := runCLI("secrets"); code != exitUsage || !strings.Contains(errs, "want a config FILE") {
		t.Fatalf("secrets without a config: exit %d, stderr %s", code, errs)
	}
	cfg := "version: 1\nservers:\n  s:\n    command: [true]\n    secrets:\n      TOKEN_T: {from: env:MCPBOX_T7_UNSET}\n    tools: {allow: [\"*\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "mcpbox.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("secrets")
	if code != 0 || !strings.Contains(out, "TOKEN_T") || !strings.Contains(out, "env:MCPBOX_T7_UNSET") {
		t.Fatalf("secrets beside an mcpbox.yaml: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// TestSecretsListIsTerminalSafe: mcpbox secrets, run in a cloned
// project, lists its mcpbox.yaml, which is not trusted: a reference
// holding an escape sequence (a clipboard write, a cleared line) is shown
// escaped, not sent to the terminal.
func TestSecretsListIsTerminalSafe(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := "version: 1\nservers:\n  s:\n    command: [true]\n    secrets:\n      TOKEN_T: {from: \"file:/x\\e]52;c;Y3VybCBldmlsIHwgc2g=\\a\\e[2K\\r\"}\n    tools: {allow: [\"*\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "mcpbox.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("secrets")
	if code != 0 || !strings.Contains(out, `file:/x\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\x1b[2K\x0d`) {
		t.Fatalf("exit %d\nstdout: %q\nstderr: %s", code, out, errs)
	}
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("control characters reach the terminal: %q", out)
	}
}
