package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/gateway"
	"mcpbox/internal/workspace"
)

// TestWorkspaceDirRefusesPlantedSymlinks: a symlink planted in the
// workspaces tree (at the agent, server or output level) does not make the
// gateway create, or a sandbox mount, a dir outside it.
func TestWorkspaceDirRefusesPlantedSymlinks(t *testing.T) {
	scope := gateway.Scope{Agent: "a1", Session: "s1"}
	for _, level := range []string{"a1", "a1/srv", "a1/srv/sessions/s1/output", "a1/srv/sessions/s1/overlay"} {
		t.Run(level, func(t *testing.T) {
			root, victim := filepath.Join(t.TempDir(), "workspaces"), t.TempDir()
			link := filepath.Join(root, level)
			if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			dir, err := workspaceDir(root, scope, "srv")
			ov, oerr := overlayDirs(root, scope, "srv")
			if strings.HasSuffix(level, "overlay") {
				err, oerr = oerr, err // the output beside it is fine
			}
			if !errors.Is(err, workspace.ErrSymlink) || !strings.Contains(err.Error(), link) {
				t.Errorf("got %q, %v; want ErrSymlink naming %s", dir, err, link)
			}
			if !strings.HasSuffix(level, "output") && !strings.HasSuffix(level, "overlay") && !errors.Is(oerr, workspace.ErrSymlink) {
				t.Errorf("overlayDirs = %+v, %v; want ErrSymlink", ov, oerr)
			}
			if names, _ := os.ReadDir(victim); len(names) > 0 {
				t.Errorf("the victim dir now holds %v", names)
			}
		})
	}
}

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
