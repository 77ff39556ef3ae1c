//go:build linux

package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	for _, tt := range []struct {
		s               Scope
		base, artifacts string
	}{
		{Scope{Server: "srv", Agent: "a1"}, "/w/a1/srv", "/x/a1/srv/sbx"},
		{Scope{Server: "srv", Agent: "a1", Session: "s1"}, "/w/a1/srv/sessions/s1", "/x/a1/srv/sbx"},
		{Scope{Server: "srv"}, "/w/_shared/srv", "/x/_shared/srv/sbx"},
	} {
		if got := Base("/w", tt.s); got != tt.base {
			t.Errorf("Base(%+v) = %s, want %s", tt.s, got, tt.base)
		}
		if got := ArtifactsDir("/x", tt.s, "sbx"); got != tt.artifacts {
			t.Errorf("ArtifactsDir(%+v) = %s, want %s", tt.s, got, tt.artifacts)
		}
	}
}

// TestWorkspaceDirRefusesPlantedSymlinks: a symlink planted in the
// workspaces tree (at the agent, server or output level) does not make the
// gateway create, or a sandbox mount, a dir outside it.
func TestWorkspaceDirRefusesPlantedSymlinks(t *testing.T) {
	scope := Scope{Server: "srv", Agent: "a1", Session: "s1"}
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
			dir, err := MakeOutput(root, scope)
			upper, work, oerr := MakeOverlay(root, scope)
			if strings.HasSuffix(level, "overlay") {
				err, oerr = oerr, err // the output beside it is fine
			}
			if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), link) {
				t.Errorf("got %q, %v; want ErrSymlink naming %s", dir, err, link)
			}
			if !strings.HasSuffix(level, "output") && !strings.HasSuffix(level, "overlay") && !errors.Is(oerr, ErrSymlink) {
				t.Errorf("MakeOverlay = %q, %q, %v; want ErrSymlink", upper, work, oerr)
			}
			if names, _ := os.ReadDir(victim); len(names) > 0 {
				t.Errorf("the victim dir now holds %v", names)
			}
		})
	}
}
