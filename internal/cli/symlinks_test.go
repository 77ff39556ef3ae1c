package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecRefusesProjectSymlinks: `mcpbox exec --output ./out` (or
// --mount ./data:...) typed in a hostile project whose out is a symlink
// is refused before any sandbox starts; so is an output in /etc.
func TestExecRefusesProjectSymlinks(t *testing.T) {
	outer := t.TempDir()
	project, victim := filepath.Join(outer, "project"), filepath.Join(outer, "victim")
	for _, d := range []string{project, victim} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"out", "data"} {
		if err := os.Symlink(victim, filepath.Join(project, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(project)
	for _, tc := range []struct {
		args []string
		link string
	}{
		{[]string{"--output", "./out"}, "out"},
		{[]string{"--output", "out/sub"}, "out"},
		{[]string{"--mount", "./data:/data:rw"}, "data"},
		{[]string{"--mount", "data:/data"}, "data"},
	} {
		code, _, errs := runCLI(append(append([]string{"exec"}, tc.args...), "--", "/bin/true")...)
		if link := filepath.Join(project, tc.link); code == 0 || !strings.Contains(errs, link) || !strings.Contains(errs, victim) {
			t.Errorf("exec %v: exit %d, stderr %q; want a refusal naming %s and %s", tc.args, code, errs, link, victim)
		}
	}
	if names, _ := os.ReadDir(victim); len(names) > 0 {
		t.Errorf("the victim dir now holds %v", names)
	}
	if code, _, errs := runCLI("exec", "--output", "/etc", "--", "/bin/true"); code == 0 || !strings.Contains(errs, "/etc") {
		t.Errorf("exec --output /etc: exit %d, stderr %q; want a refusal", code, errs)
	}
}
