package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProtectedCheck: outputs a hostile config or project would aim at
// the home dir, credentials, system dirs, the state dir or the input are
// refused, naming the place; plain project outputs pass.
func TestProtectedCheck(t *testing.T) {
	outer := t.TempDir()
	home := filepath.Join(outer, "home")
	state := filepath.Join(home, ".local", "state", "mcpbox")
	input := filepath.Join(outer, "work", "project")
	for _, d := range []string{state, input, filepath.Join(home, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink to home: Check sees through it in the protected paths.
	if err := os.Symlink(home, filepath.Join(outer, "homelink")); err != nil {
		t.Fatal(err)
	}
	p := Protected{Home: filepath.Join(outer, "homelink"), StateDir: state, Input: input}
	for _, tc := range []struct {
		dir   string
		place string // named in the error; "" if allowed
	}{
		{"/", "/etc"},
		{"/etc", "/etc"},
		{"/etc/cron.d", "/etc"},
		{"/usr/local/bin", "/usr"},
		{"/proc", "/proc"},
		{home, home},
		{filepath.Join(home, ".ssh"), filepath.Join(home, ".ssh")},
		{filepath.Join(home, ".ssh", "keys"), filepath.Join(home, ".ssh")},
		{filepath.Join(home, ".config"), filepath.Join(home, ".config")},
		{filepath.Join(home, ".local"), state},
		{filepath.Join(home, ".local", "state"), state},
		{state, state},
		{filepath.Join(state, "workspaces"), state},
		{outer, home},
		{filepath.Join(outer, "work"), input},
		{input, input},
		// Allowed: beside or inside the project, in home, in /tmp.
		{filepath.Join(input, "mcpbox-out"), ""},
		{filepath.Join(outer, "work", "out"), ""},
		{filepath.Join(home, "results"), ""},
		// The home's other hidden entries: settings and code others run.
		{filepath.Join(home, ".sshx"), filepath.Join(home, ".sshx")},
		{filepath.Join(home, ".bashrc"), filepath.Join(home, ".bashrc")},
		{filepath.Join(home, ".local", "bin"), filepath.Join(home, ".local")},
		{filepath.Join(home, ".gitconfig"), filepath.Join(home, ".gitconfig")},
		{filepath.Join(home, "bin"), filepath.Join(home, "bin")},
		{filepath.Join(home, "go"), filepath.Join(home, "go", "bin")},
		{filepath.Join(home, "node_modules", "x"), filepath.Join(home, "node_modules")},
		// A repository's own files, wherever it is.
		{filepath.Join(input, ".git"), filepath.Join(input, ".git")},
		{filepath.Join(outer, "victim", ".git", "hooks"), filepath.Join(outer, "victim", ".git")},
		{filepath.Join(home, "repo", ".git", "config"), filepath.Join(home, "repo", ".git")},
	} {
		err := p.Check(tc.dir)
		if tc.place == "" {
			if err != nil {
				t.Errorf("Check(%s) = %v, want nil", tc.dir, err)
			}
			continue
		}
		if !errors.Is(err, ErrProtected) || !strings.Contains(err.Error(), tc.place) || !strings.Contains(err.Error(), tc.dir) {
			t.Errorf("Check(%s) = %v, want ErrProtected naming %s", tc.dir, err, tc.place)
		}
	}
	if err := (Protected{}).Check(filepath.Join(home, ".ssh")); err != nil {
		t.Errorf("the zero Protected refuses a home path: %v", err)
	}
	// A project kept in a hidden dir writes its own outputs, and only
	// those.
	proj := filepath.Join(home, ".work", "proj")
	p = Protected{Home: home, Project: proj}
	for dir, place := range map[string]string{
		filepath.Join(proj, "mcpbox-out"):          "",
		proj:                                       "",
		filepath.Join(home, ".work", "other"):      filepath.Join(home, ".work"),
		filepath.Join(home, ".bashrc"):             filepath.Join(home, ".bashrc"),
		filepath.Join(proj, ".git", "hooks"):       filepath.Join(proj, ".git"),
		filepath.Join(home, ".ssh", "proj", "out"): filepath.Join(home, ".ssh"),
	} {
		err := p.Check(dir)
		if place == "" && err != nil || place != "" && (!errors.Is(err, ErrProtected) || !strings.Contains(err.Error(), place)) {
			t.Errorf("project in %s: Check(%s) = %v, want %q named", proj, dir, err, place)
		}
	}
	// A dotfile manager's links: where they lead is a dotfile too, and so
	// is the repository holding it; a link to the home is no reason to
	// refuse all of it.
	for _, d := range []string{filepath.Join(home, "dotfiles"), filepath.Join(home, "results")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "dotfiles", "bashrc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{".bashrc": filepath.Join(home, "dotfiles", "bashrc"), ".homelink": home} {
		if err := os.Symlink(to, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	p = Protected{Home: home}
	for dir, place := range map[string]string{
		filepath.Join(home, "dotfiles", "bashrc"): filepath.Join(home, "dotfiles", "bashrc"),
		filepath.Join(home, "dotfiles"):           filepath.Join(home, "dotfiles", "bashrc"),
		filepath.Join(home, "results"):            "",
	} {
		err := p.Check(dir)
		if place == "" && err != nil || place != "" && (!errors.Is(err, ErrProtected) || !strings.Contains(err.Error(), place)) {
			t.Errorf("with ~/.bashrc linked: Check(%s) = %v, want %q named", dir, err, place)
		}
	}
	// A project config in the home dir itself does not open its hidden
	// entries.
	if err := (Protected{Home: home, Project: home}).Check(filepath.Join(home, ".bashrc")); !errors.Is(err, ErrProtected) {
		t.Errorf("project in the home dir: Check(~/.bashrc) = %v", err)
	}
}

// TestProtectedRuntimeDir: a writable mount may not reach the runtime
// dirs, whose service dirs run code as the user: a D-Bus service file in
// /run/user/UID/dbus-1/services, a systemd unit in its systemd/user;
// nor $XDG_RUNTIME_DIR where it lies elsewhere. Before, every one of
// them but the socket-holding runtime dir itself passed. A project on a
// removable medium, mounted below /run/media, keeps its output.
func TestProtectedRuntimeDir(t *testing.T) {
	rt := filepath.Join(t.TempDir(), "runtime")
	if err := os.MkdirAll(filepath.Join(rt, "dbus-1", "services"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", rt)
	for dir, place := range map[string]string{
		"/run":                                  "/run",
		"/run/user/1000":                        "/run",
		"/run/user/1000/dbus-1/services":        "/run",
		"/run/user/1000/systemd/user":           "/run",
		"/var/run/user/1000":                    "/var/run",
		rt:                                      rt,
		filepath.Join(rt, "dbus-1"):             rt,
		filepath.Join(rt, "dbus-1", "services"): rt,
		filepath.Dir(rt):                        rt,
		filepath.Join(filepath.Dir(rt), "out"):  "",
		// Removable media, where a project may live.
		"/run/media/alice/stick/proj/out": "",
		"/run/media/alice/stick":          "",
		"/run/media/alice":                "/run",
		"/run/media":                      "/run",
	} {
		err := (Protected{}).Check(dir)
		if place == "" && err != nil || place != "" && (!errors.Is(err, ErrProtected) || !strings.Contains(err.Error(), place)) {
			t.Errorf("Check(%s) = %v, want %q named", dir, err, place)
		}
	}
}

// TestProtectedNotMadeYet: a protected place that does not exist yet
// (the state root before the first serve) is compared where it will be,
// also below a symlinked directory (a home dir on another disk): a
// writable dir reached by the real path is refused.
func TestProtectedNotMadeYet(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "disk", "me")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	if err := os.Symlink(real, home); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(home, ".local", "state", "mcpbox") // not made
	if got, want := ResolveExisting(root), filepath.Join(real, ".local", "state", "mcpbox"); got != want {
		t.Fatalf("ResolveExisting(%s) = %s, want %s", root, got, want)
	}
	p := Protected{Root: root}
	for _, dir := range []string{filepath.Join(real, ".local"), filepath.Join(real, ".local", "state", "mcpbox", "projects")} {
		if err := p.Check(dir); !errors.Is(err, ErrProtected) {
			t.Errorf("Check(%s) = %v, want it refused: it would show the state root once made", dir, err)
		}
	}
	if err := p.Check(filepath.Join(real, "work")); err != nil {
		t.Errorf("Check of a dir beside the state root: %v", err)
	}
}

// TestCredentialDirLinked: a credential dir that is a link (a dotfile
// manager's ~/.ssh -> ~/dotfiles/ssh) is protected where it leads too:
// a writable mount of the target, or of a dir holding it, is refused,
// and a read-only one is named.
func TestCredentialDirLinked(t *testing.T) {
	home := t.TempDir()
	target := filepath.Join(home, "dotfiles", "ssh")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, ".ssh")); err != nil {
		t.Fatal(err)
	}
	p := Protected{Home: home}
	for _, dir := range []string{target, filepath.Join(home, "dotfiles"), filepath.Join(target, "keys")} {
		if err := p.Check(dir); !errors.Is(err, ErrProtected) {
			t.Errorf("Check(%s) = %v, want ErrProtected", dir, err)
		}
		if got := CredentialDir(home, dir); got == "" && dir != filepath.Join(home, "dotfiles") {
			t.Errorf("CredentialDir(%s) = none", dir)
		}
	}
	if err := p.Check(filepath.Join(home, "proj")); err != nil {
		t.Errorf("a project dir: %v", err)
	}
	if got := CredentialDir(home, filepath.Join(home, "proj")); got != "" {
		t.Errorf("CredentialDir of a project dir = %s", got)
	}
}

// TestCredentialLinksInside: links directly in a credential dir (stow's
// ~/.ssh/config -> ~/dotfiles/ssh/config, ~/.config/gh -> ~/dotfiles/gh)
// are protected where they lead; a credential dir linked to the home or
// above (~/.kube -> /) does not make every path a credential dir.
func TestCredentialLinksInside(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{".ssh", ".config", "dotfiles/ssh", "dotfiles/gh", "proj"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "dotfiles/ssh/config"), []byte("Host *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{".ssh/config": "dotfiles/ssh/config", ".config/gh": "dotfiles/gh", ".kube": "/"} {
		dst := target
		if !filepath.IsAbs(target) {
			dst = filepath.Join(home, target)
		}
		if err := os.Symlink(dst, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	p := Protected{Home: home}
	for _, dir := range []string{"dotfiles", "dotfiles/ssh", "dotfiles/gh"} {
		if err := p.Check(filepath.Join(home, dir)); !errors.Is(err, ErrProtected) {
			t.Errorf("Check(~/%s) = %v, want ErrProtected", dir, err)
		}
	}
	if got := CredentialDir(home, filepath.Join(home, "dotfiles/gh/hosts.yml")); got == "" {
		t.Error("a file where ~/.config/gh leads is no credential")
	}
	if err := p.Check(filepath.Join(home, "proj")); err != nil {
		t.Errorf("a project dir with ~/.kube -> /: %v", err)
	}
	if got := CredentialDir(home, "/srv/data"); got != "" {
		t.Errorf("CredentialDir(/srv/data) = %s with ~/.kube -> /", got)
	}
}
