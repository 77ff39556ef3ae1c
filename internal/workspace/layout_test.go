//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// TestReleaseSession: an ended session's workspace goes, but for an
// input overlay it changed, which stays marked ended; past KeptOverlays
// the oldest kept go.
func TestReleaseSession(t *testing.T) {
	root := t.TempDir()
	sessions := filepath.Join(root, "alice", "fs", "sessions")
	session := func(id string, changed bool) string {
		base := filepath.Join(sessions, id)
		for _, d := range []string{"output", "overlay/upper", "overlay/work"} {
			if err := os.MkdirAll(filepath.Join(base, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if changed {
			if err := os.WriteFile(filepath.Join(base, "overlay", "upper", "a.txt"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return base
	}
	if kept, _ := ReleaseSession(session("idle", false)); kept {
		t.Error("a session that changed nothing was kept")
	}
	if _, err := os.Stat(filepath.Join(sessions, "idle")); !os.IsNotExist(err) {
		t.Errorf("the unchanged session's workspace: %v, want it gone", err)
	}
	var ids []string
	for i := range KeptOverlays + 2 {
		id := fmt.Sprintf("s%02d", i)
		ids = append(ids, id)
		base := session(id, true)
		kept, pruned := ReleaseSession(base)
		if !kept {
			t.Fatalf("session %s with a change was not kept", id)
		}
		if _, err := os.Stat(filepath.Join(base, "output")); !os.IsNotExist(err) {
			t.Errorf("session %s's output: %v, want it gone", id, err)
		}
		if want := max(0, i+1-KeptOverlays); len(pruned) != min(1, want) {
			t.Errorf("after %d sessions: pruned %v", i+1, pruned)
		}
		// Marks made within a moment: a second apart, in the past, orders
		// them as made.
		os.Chtimes(filepath.Join(base, endedMark), time.Time{}, time.Now().Add(time.Duration(i-100)*time.Second))
	}
	// A second release of a kept session keeps nothing new.
	if kept, _ := ReleaseSession(filepath.Join(sessions, ids[len(ids)-1])); kept {
		t.Error("a second release of a kept session reported a keep")
	}
	var got []string
	for _, e := range EndedSessions(sessions) {
		got = append(got, e.ID)
	}
	if d := cmp.Diff(ids[2:], got); d != "" {
		t.Errorf("kept sessions (-want +got):\n%s", d)
	}
}
