package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
	"mcpbox/internal/ptytest"
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

// TestServeInHomeSaysOnlyWhy: the embedded default served in the home
// directory ends with the one error that names the home, and exit 2; no
// startup summary "1 warning above" before it, whose warning said the same
// as a warning, as if serve would go on.
func TestServeInHomeSaysOnlyWhy(t *testing.T) {
	home := shortTemp(t)
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, ".state"))
	t.Chdir(home)
	code, _, errs := runCLI("serve", "--stdio", "--allow-degraded")
	if code != exitUsage || strings.Count(errs, "is or holds your home directory") != 1 || strings.Contains(errs, "warning") {
		t.Fatalf("serve in the home dir: exit %d, stderr:\n%s\nwant exit %d and the refusal once, no warnings", code, errs, exitUsage)
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

// TestSecretsRotateFindsTheProject: secrets rotate, like the other admin
// commands, reaches the current project's gateways with no flag.
func TestSecretsRotateFindsTheProject(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := "version: 1\nstate_dir: ./st\nservers:\n  s:\n    command: [true]\n    secrets:\n      TOKEN_T: {from: env:MCPBOX_T8_UNSET}\n    tools: {allow: [\"*\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "mcpbox.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "xdg"))
	if err := instance.MakeDir(filepath.Join(dir, "st")); err != nil { // as a serve that ran leaves it
		t.Fatal(err)
	}
	root, err := instance.Root()
	if err != nil {
		t.Fatal(err)
	}
	if err := instance.Register(root, filepath.Join(dir, "st")); err != nil {
		t.Fatal(err)
	}
	_, _, want := runCLI("secrets", "rotate", "TOKEN_T", "--state-dir", filepath.Join(dir, "st"))
	code, _, errs := runCLI("secrets", "rotate", "TOKEN_T")
	if code != 1 || errs != want {
		t.Errorf("secrets rotate in the project: exit %d, stderr %q; want exit 1 and what --state-dir of its state dir says: %q", code, errs, want)
	}
}

// TestBannerTokenOnlyOnTerminal: the embedded default's banner shows the
// bearer token only when stderr is a terminal; anywhere else (a service
// manager's journal, a file: stdin /dev/null and stderr captured) it
// says where the token is kept, and its client config has a placeholder.
func TestBannerTokenOnlyOnTerminal(t *testing.T) {
	c, err := config.Load("(embedded default)", defaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	dir, base := t.TempDir(), t.TempDir()
	const token = "mcpbox_bannertesttoken0123456789"
	banner := func(stderr *os.File) {
		e := &env{stdout: io.Discard, stderr: stderr}
		e.printBanner("http://127.0.0.1:8765/mcp", token, dir, c, base)
	}

	logFile, err := os.CreateTemp(t.TempDir(), "journal")
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	banner(logFile)
	logged, err := os.ReadFile(logFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logged), token) || !strings.Contains(string(logged), "Token:   in "+bearer.Token.Path(dir)) ||
		!strings.Contains(string(logged), `"Authorization": "Bearer TOKEN"`) {
		t.Errorf("banner on a file shows the token or not where it is:\n%s", logged)
	}

	ptmx, pts := ptytest.Open(t)
	banner(pts) // fits the pty's buffer: the write does not wait for the read
	shown := make(chan string, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte("Client config")) || !bytes.Contains(got, []byte("}\r\n")) {
			k, err := ptmx.Read(buf)
			if err != nil {
				break
			}
			got = append(got, buf[:k]...)
		}
		shown <- string(got)
	}()
	select {
	case got := <-shown:
		if !strings.Contains(got, "Token:   "+token) || !strings.Contains(got, `"Authorization": "Bearer `+token+`"`) {
			t.Errorf("banner on a terminal lacks the token:\n%s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read nothing of the banner from the terminal in 10s")
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
