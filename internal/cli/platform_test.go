package cli

import (
	"os"
	"strings"
	"testing"

	"mcpbox/internal/daemon"
	"mcpbox/internal/sandbox"
)

// TestLocalNeedsLinux: on macOS (goos set as there; its build is only
// cross-compiled in CI) exec and run refuse at once, before any flag is
// acted on (the --secret cmd: below would run), and serve's refusal (a
// *daemon.ConfigError, see daemon.TestDarwinRefusesLocalAtOnce) exits
// alike: 2, the config-error code, with one line that says what to do.
func TestLocalNeedsLinux(t *testing.T) {
	defer func(g string) { goos = g }(goos)
	goos = "darwin"
	marker := t.TempDir() + "/ran"
	const want = "local sandboxes need Linux; use backend: kubernetes"
	for _, cmd := range []string{"exec", "run"} {
		code, out, errs := runCLI(cmd, "--secret", "S=cmd:touch "+marker, "--", "true")
		if code != 2 || out != "" || errs != "mcpbox: "+cmd+": "+want+"\n" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", cmd, code, out, errs, want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the --secret command ran before the refusal")
	}
	if code, out, _ := runCLI("exec", "--help"); code != 0 || !strings.Contains(out, "USAGE") {
		t.Errorf("exec --help: exit %d, %q; the help still works", code, out)
	}
	var errb strings.Builder
	e := &env{stderr: &errb}
	if code := e.serveExit(&daemon.ConfigError{Err: sandbox.LocalSupported("darwin")}, nil); code != 2 || !strings.Contains(errb.String(), want) {
		t.Errorf("serve: exit %d, %q", code, errb.String())
	}
	goos = "linux"
	if code, _, errs := runCLI("exec", "--no-such-flag"); code != exitUsage || strings.Contains(errs, want) {
		t.Errorf("linux: exec refused for the platform: %d %q", code, errs)
	}
}
