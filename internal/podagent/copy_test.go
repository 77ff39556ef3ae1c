//go:build linux

package podagent

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyTo runs `mcpbox agent --copy-to` (the test binary as the
// agent): the copy is the running executable byte for byte, mode 0555,
// runs, replaces an older file whole, and leaves no temporary file; a
// directory it cannot write is a one-line error and exit 1.
func TestCopyTo(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "mcpbox")
	if err := os.WriteFile(dst, []byte("an older agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	agent := func(bin string, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "PODAGENT_TEST_AGENT=1")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := agent(self, "--copy-to", dst); code != 0 {
		t.Fatalf("--copy-to: exit %d: %s", code, out)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the copy has %d bytes, the executable %d, or they differ", len(got), len(want))
	}
	st, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o555 {
		t.Errorf("the copy's mode is %v, want 0555", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the target dir, want only the copy", len(ents))
	}
	// The copy is an agent: it runs and parses its flags.
	if out, code := agent(dst, "-h"); code != 0 || !strings.Contains(out, "copy-to") {
		t.Errorf("the copy -h: exit %d: %s", code, out)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "--copy-to", filepath.Join(ro, "mcpbox"))
	cmd.Env = append(os.Environ(), "PODAGENT_TEST_AGENT=1")
	if os.Geteuid() == 0 {
		// root writes a 0555 dir: drop to nobody for the attempt.
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", self, "--copy-to", filepath.Join(ro, "mcpbox"))
		cmd.Env = append(os.Environ(), "PODAGENT_TEST_AGENT=1")
	}
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "copying the agent to "+ro) {
		t.Errorf("--copy-to into a read-only dir: exit %d: %s", cmd.ProcessState.ExitCode(), out)
	}
}
