package specconv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/workspace"
)

// TestServerSpecRefusesProjectSymlinks: a hostile project ships symlinks
// where its config (or the default) names a source. Each is refused with
// an error naming the link and its target, and nothing is made at the
// target.
func TestServerSpecRefusesProjectSymlinks(t *testing.T) {
	for _, tc := range []struct {
		name, link, fs string
	}{
		{"output", "mcpbox-out", "output: {source: ./mcpbox-out}"},
		{"output intermediate", "build", "output: {source: ./build/out}"},
		{"input", "src", "input: {source: ./src}"},
		{"mount", "data", "mounts: [{source: ./data, target: /data}]"},
		{"rw mount", "data", "mounts: [{source: ./data, target: /data, mode: rw}]"},
		{"mount in input", "repo/data", "input: {source: ./repo}\n      mounts: [{source: INPUT/data, target: /data}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outer := t.TempDir()
			project, victim := filepath.Join(outer, "project"), filepath.Join(outer, "victim")
			for _, d := range []string{filepath.Join(project, "repo"), victim} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(project, tc.link)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			fsys := strings.ReplaceAll(tc.fs, "INPUT", filepath.Join(project, "repo"))
			cfg := filepath.Join(project, "mcpbox.yaml")
			write(t, cfg, "version: 1\nstate_dir: "+filepath.Join(outer, "state")+"\nservers:\n  s:\n    command: [x]\n    filesystem:\n      "+fsys+"\n")
			spec, err := policySpec(t, cfg)
			if !errors.Is(err, workspace.ErrSymlink) || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), victim) {
				t.Fatalf("Policy = %v (spec %+v), want ErrSymlink naming %s and %s", err, spec, link, victim)
			}
			// Each says what to do about a link the project brought.
			if !strings.Contains(err.Error(), "if you did not make that link, it came with the project") {
				t.Errorf("Policy = %v, want what to do about the link", err)
			}
			if names, _ := os.ReadDir(victim); len(names) > 0 {
				t.Errorf("the victim dir now holds %v", names)
			}
		})
	}
}

// TestServerSpecRefusesProtectedOutputs: outputs and rw mounts aimed at
// the home dir, its credentials, /etc, /, the state dir's parents or the
// input's are refused, before anything is made there.
func TestServerSpecRefusesProtectedOutputs(t *testing.T) {
	outer := t.TempDir()
	home := filepath.Join(outer, "home")
	project := filepath.Join(home, "project")
	for _, d := range []string{filepath.Join(project, "repo"), filepath.Join(home, "other", ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(home, ".bashrc"), "# the user's\n")
	// A dotfile manager's link: the mount's real path is not hidden.
	if err := os.MkdirAll(filepath.Join(outer, "dotfiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(outer, "dotfiles", "profile"), "# the user's\n")
	if err := os.Symlink(filepath.Join(outer, "dotfiles", "profile"), filepath.Join(home, ".profile")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	// Made only if the check failed: the cleanup removes it then.
	etcNew := filepath.Join("/etc", "mcpbox-test-"+filepath.Base(filepath.Dir(outer)))
	for _, tc := range []struct {
		name, fs string
		state    string // a dir made first (state_dir, unless it leaves the project)
		made     string // must not exist afterwards, if set
	}{
		{"home", "output: {source: ~/}", "", ""},
		{"ssh", "output: {source: ~/.ssh}", "", filepath.Join(home, ".ssh")},
		{"ssh rw mount", "mounts: [{source: ~/.ssh, target: /k, mode: rw}]", "../.ssh", ""},
		{"etc", "output: {source: /etc}", "", ""},
		{"etc new", "output: {source: " + etcNew + "}", "", etcNew},
		{"root", "output: {source: /}", "", ""},
		{"parent of default state", "output: {source: ~/.local}", "", filepath.Join(home, ".local")},
		{"parent of state", "output: {source: ./st}", "./st/state", ""},
		{"input itself", "input: {source: ./repo}\n      output: {source: ./repo}", "", ""},
		{"parent of input", "input: {source: ./repo}\n      output: {source: .}", "", ""},
		{"shell rc file", "mounts: [{source: ~/.bashrc, target: /f, mode: rw}]", "", ""},
		{"dir in a dot dir", "output: {source: ~/.local/bin}", "", filepath.Join(home, ".local", "bin")},
		{"own git hooks", "output: {source: ./.git/hooks}", "", filepath.Join(project, ".git")},
		{"other repo's git dir", "mounts: [{source: ../other/.git, target: /g, mode: rw}]", "", ""},
		{"linked dotfile", "mounts: [{source: ~/.profile, target: /f, mode: rw}]", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.state != "" {
				if err := os.MkdirAll(filepath.Join(project, tc.state), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(project, "mcpbox.yaml")
			extra := ""
			if strings.HasPrefix(tc.state, "./") {
				extra = "state_dir: " + tc.state + "\n"
			}
			write(t, cfg, "version: 1\n"+extra+"servers:\n  s:\n    command: [x]\n    filesystem:\n      "+tc.fs+"\n")
			spec, err := policySpec(t, cfg)
			if !errors.Is(err, workspace.ErrProtected) {
				t.Fatalf("Policy = %v (spec %+v), want ErrProtected", err, spec)
			}
			if tc.made != "" {
				t.Cleanup(func() { os.Remove(tc.made) })
				if _, err := os.Lstat(tc.made); err == nil {
					t.Errorf("%s was made", tc.made)
				}
			}
		})
	}
	// The default's layout passes: an output in the project, beside the input.
	cfg := filepath.Join(project, "mcpbox.yaml")
	write(t, cfg, "version: 1\nservers:\n  s:\n    command: [x]\n    filesystem:\n      input: {source: .}\n      output: {source: ./mcpbox-out}\n")
	if spec, err := policySpec(t, cfg); err != nil || spec.Output != filepath.Join(project, "mcpbox-out") {
		t.Fatalf("Policy of the default layout = %v, output %q", err, spec.Output)
	}
}

// TestStateDirRefusesProjectSymlink: a project config's state_dir that is
// a symlink out of the project is refused: workspaces, sockets and the
// audit would go wherever it points.
func TestStateDirRefusesProjectSymlink(t *testing.T) {
	outer := t.TempDir()
	project, victim := filepath.Join(outer, "project"), filepath.Join(outer, "victim")
	for _, d := range []string{project, victim} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(project, "state")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	c := &config.Config{StateDir: "./state/mcpbox"}
	dir, err := StateDir(c, "", project, "")
	if !errors.Is(err, workspace.ErrSymlink) || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), victim) {
		t.Fatalf("StateDir = %q, %v; want ErrSymlink naming %s and %s", dir, err, link, victim)
	}
	if names, _ := os.ReadDir(victim); len(names) > 0 {
		t.Errorf("the victim dir now holds %v", names)
	}
	c.StateDir = "./own/state"
	if dir, err := StateDir(c, "", project, ""); err != nil || dir != filepath.Join(project, "own", "state") {
		t.Errorf("StateDir of a plain dir = %q, %v", dir, err)
	}
}

// A config's state_dir may not name a place in mcpbox's state root where
// other projects' state dirs are (their names can be worked out from
// their paths): not as written, not through a link, not with ~, in either
// root a serve of the user may use. --state-dir, the user's choice, may;
// so may a config the root itself or another dir in it.
func TestStateDirRefusesStateRoot(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("HOME", filepath.Join(tmp, "home"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	if err := os.MkdirAll(filepath.Join(tmp, "victim"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "victim", "mcpbox.yaml"), []byte("version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	victim, err := ProjectStateDir(filepath.Join(tmp, "victim", "mcpbox.yaml"), filepath.Join(tmp, "victim"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "elsewhere")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(tmp, "repo")
	os.Mkdir(project, 0o700)
	for _, sd := range []string{victim, filepath.Dir(victim), link, filepath.Join(link, "sub")} {
		if dir, err := StateDir(&config.Config{StateDir: sd}, filepath.Join(project, "mcpbox.yaml"), project, ""); err == nil || !strings.Contains(err.Error(), "other projects' state dirs") {
			t.Errorf("state_dir %s: %q, %v; want it refused", sd, dir, err)
		}
	}
	if dir, err := StateDir(&config.Config{}, "", project, victim); err != nil || dir != victim {
		t.Errorf("--state-dir %s: %q, %v; want it taken", victim, dir, err)
	}
	if dir, err := StateDir(&config.Config{StateDir: filepath.Join(tmp, "shared")}, "", project, ""); err != nil || dir != filepath.Join(tmp, "shared") {
		t.Errorf("state_dir outside the state root: %q, %v", dir, err)
	}
	// The root itself, and a dir of its own in it, are state dirs configs
	// may share.
	root := filepath.Dir(filepath.Dir(victim))
	for _, sd := range []string{root, filepath.Join(root, "work")} {
		if dir, err := StateDir(&config.Config{StateDir: sd}, "", project, ""); err != nil || dir != sd {
			t.Errorf("state_dir %s, in the state root but no project's: %q, %v", sd, dir, err)
		}
	}
	// The other root (a serve started without XDG_STATE_HOME keeps its
	// projects under the home) is refused too.
	sd := "~/.local/state/mcpbox/projects/victim-0123456789ab"
	if dir, err := StateDir(&config.Config{StateDir: sd}, "", project, ""); err == nil || !strings.Contains(err.Error(), "other projects' state dirs") {
		t.Errorf("state_dir %s with XDG_STATE_HOME set: %q, %v; want it refused", sd, dir, err)
	}
	// Without XDG_STATE_HOME the root is under the home: ~ names it too.
	t.Setenv("XDG_STATE_HOME", "")
	if dir, err := StateDir(&config.Config{StateDir: sd}, "", project, ""); err == nil || !strings.Contains(err.Error(), "other projects' state dirs") {
		t.Errorf("state_dir %s: %q, %v; want it refused", sd, dir, err)
	}
}
