package specconv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/workspace"
)

// TestStateDirRelativeIsAbsolute: a relative state_dir (or --state-dir)
// comes back absolute, resolved against the config's directory, whatever
// the working directory: sandbox setup (overlay upper dirs) runs
// elsewhere.
func TestStateDirRelativeIsAbsolute(t *testing.T) {
	tmp := t.TempDir()
	proj := filepath.Join(tmp, "proj")
	os.Mkdir(proj, 0o700)
	t.Chdir(tmp)
	for _, sd := range []string{"../state", "state", "./x/../state2"} {
		got, err := StateDir(&config.Config{StateDir: sd}, "proj/mcpbox.yaml", "proj", "")
		want := filepath.Join(proj, sd)
		if err != nil || got != want {
			t.Errorf("state_dir %s: %q, %v; want %s", sd, got, err, want)
		}
	}
	// The state dir inside the input, named relatively from a config in a
	// subdir: refused for every input mode, as an absolute one is. (A
	// relative path slipped past hideStateDir: read-only inputs showed the
	// state dir, overlays failed on the overlapping upper dir.)
	os.MkdirAll(filepath.Join(proj, "cfg"), 0o700)
	sd, err := StateDir(&config.Config{StateDir: "../state"}, "proj/cfg/mcpbox.yaml", "proj/cfg", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := hideStateDir(&sandbox.Spec{Input: proj}, sd); err == nil || !strings.Contains(err.Error(), "would show mcpbox's state dir") {
		t.Errorf("a state dir inside the input, named relatively: %v", err)
	}
	// exec --policy and run --policy protect the same place.
	if got := configStateDir(&config.Config{StateDir: "../state"}, "proj"); got != filepath.Join(proj, "../state") {
		t.Errorf("configStateDir: %q, want %s", got, filepath.Join(proj, "../state"))
	}
	if got, err := StateDir(&config.Config{}, "", "proj", "flagdir"); err != nil || !filepath.IsAbs(got) {
		t.Errorf("--state-dir flagdir: %q, %v; want an absolute path", got, err)
	}
}

func TestHideStateDir(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "home", ".local", "state", "mcpbox")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec sandbox.Spec
		ok   bool
	}{
		{"input above the state dir", sandbox.Spec{Input: filepath.Join(root, "home")}, false},
		{"mount inside it", sandbox.Spec{Mounts: []sandbox.Mount{{Source: filepath.Join(state, "workspaces")}}}, false},
		{"output is it", sandbox.Spec{Output: state}, false},
		{"input is /", sandbox.Spec{Input: "/"}, false},
		{"mount of /", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/", Target: "/host"}}}, false},
		{"elsewhere", sandbox.Spec{Input: filepath.Join(root, "project"), Output: filepath.Join(root, "home", "out")}, true},
	}
	for _, tt := range tests {
		err := hideStateDir(&tt.spec, state)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestProtectFiles: a writable mount over the lock file's dir, the config
// or the audit copy is refused; read-only mounts and other dirs are fine.
func TestProtectFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "project", "mcpbox.yaml")
	out := filepath.Join(dir, "out")
	for _, d := range []string{filepath.Dir(cfg), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	protected := []string{filepath.Dir(cfg), cfg, filepath.Join(out, "..", "audit.jsonl")}
	tests := []struct {
		name string
		spec sandbox.Spec
		ok   bool
	}{
		{"output elsewhere", sandbox.Spec{Output: out}, true},
		{"output is the project", sandbox.Spec{Output: filepath.Dir(cfg)}, false},
		{"rw mount above the project", sandbox.Spec{Mounts: []sandbox.Mount{{Source: dir, Target: "/data", Writable: true}}}, false},
		{"ro mount of the project", sandbox.Spec{Mounts: []sandbox.Mount{{Source: filepath.Dir(cfg), Target: "/data"}}}, true},
		{"output is /", sandbox.Spec{Output: "/"}, false},
		{"rw mount of /", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/", Target: "/host", Writable: true}}}, false},
	}
	for _, tt := range tests {
		if err := protectFiles(&tt.spec, protected); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestConfigStateDir: the admin commands find a gateway's state dir from
// its config: state_dir resolved against the config's directory, or the
// project's own, which looking does not make.
func TestConfigStateDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	cfg := filepath.Join(tmp, "proj", "mcpbox.yaml")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte("servers: {}\n"), 0o600)
	got, err := ConfigStateDir(&config.Config{StateDir: "st"}, cfg)
	if want := filepath.Join(tmp, "proj", "st"); err != nil || got != want {
		t.Errorf("with state_dir: %q %v, want %s", got, err, want)
	}
	got, err = ConfigStateDir(&config.Config{}, cfg)
	want, werr := ProjectStateDir(cfg, filepath.Dir(cfg))
	if err != nil || werr != nil || got != want || !strings.HasPrefix(got, filepath.Join(tmp, "xdg")) {
		t.Errorf("without: %q %v, want %q %v", got, err, want, werr)
	}
	if _, err := os.Stat(got); !os.IsNotExist(err) {
		t.Errorf("looking made the project's state dir: %v", err)
	}
}

// TestRefusedInputMakesNoOutput: a server whose input shows the state dir
// (the default started in $HOME) is refused before its output dir is
// made: the refusal leaves nothing behind.
func TestRefusedInputMakesNoOutput(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, ".local", "state", "mcpbox")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  s:\n    command: [x]\n    filesystem: {input: {source: .}, output: {source: ./mcpbox-out}}\n    tools: {allow: ['*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Server(c, c.Server("s"), Options{Base: home, StateDir: state})
	if err == nil || !strings.Contains(err.Error(), "would show mcpbox's state dir") {
		t.Fatalf("Server with the state dir in its input: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(home, "mcpbox-out")); err == nil {
		t.Error("the refused server's output dir was made")
	}
}

// TestInputHoldingHomeRefused: an input that is the home dir or a parent
// of it (the default started in ~ or /) is refused for what it would
// show (~/.ssh), even with the state dir elsewhere; a dir in the home dir
// is not.
func TestInputHoldingHomeRefused(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	state := filepath.Join(tmp, "state")
	for _, d := range []string{filepath.Join(home, "proj"), state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  s:\n    command: [x]\n    filesystem: {input: {source: .}}\n    tools: {allow: ['*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{home, tmp} {
		_, err := Server(c, c.Server("s"), Options{Base: base, StateDir: state})
		if err == nil || !strings.Contains(err.Error(), "is or holds your home directory") || !strings.Contains(err.Error(), "~/.ssh") {
			t.Errorf("input %s: %v, want the home directory refused", base, err)
		}
	}
	if err := InputHidesState(c.Server("s"), Options{Base: filepath.Join(home, "proj"), StateDir: state}); err != nil {
		t.Errorf("a project dir in the home dir: %v", err)
	}
}

// TestTemplateHoldingHomeRefused: a template, copied where the server
// reads it, is refused where a mount is: the home dir or a parent of it,
// mcpbox's state root or a dir in it, the state dir; a dir in the home
// dir is not.
func TestTemplateHoldingHomeRefused(t *testing.T) {
	tmp := t.TempDir()
	home, xdg, state := filepath.Join(tmp, "home"), filepath.Join(tmp, "xdg"), filepath.Join(tmp, "state")
	for _, d := range []string{filepath.Join(home, "proj", "tmpl"), filepath.Join(xdg, "mcpbox", "projects"), state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", xdg)
	base := filepath.Join(home, "proj")
	for _, tt := range []struct{ p, want string }{
		{"~/", "is or holds your home directory"},
		{"../..", "is or holds your home directory"},
		{filepath.Join(xdg, "mcpbox", "projects"), "mcpbox's state root"},
		{xdg, "mcpbox's state root"},
		{tmp, "is or holds your home directory"},
		{state, "mcpbox's state dir"},
		{"not-yet", "does not exist"},
		{"tmpl", ""},
	} {
		got, err := Template(base, "", state, tt.p)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("template %s: %q, %v; want %q", tt.p, got, err, tt.want)
		}
	}
}

// TestHideHome: a mount that is or holds the home dir, or that shows
// mcpbox's state root (every project's state dir), is refused with the
// state dir elsewhere; a dir in the home dir (~/.ssh, mounted on purpose)
// and one beside the state root are not.
func TestHideHome(t *testing.T) {
	tmp := t.TempDir()
	home, xdg := filepath.Join(tmp, "home"), filepath.Join(tmp, "xdg")
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(xdg, "mcpbox", "projects"), filepath.Join(tmp, "other")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", xdg)
	mount := func(src string) *sandbox.Spec {
		return &sandbox.Spec{Mounts: []sandbox.Mount{{Source: src, Target: "/data"}}}
	}
	for _, tt := range []struct {
		src, want string
	}{
		{home, "is or holds your home directory"},
		{tmp, "is or holds your home directory"},
		{xdg, "mcpbox's state root"},
		{filepath.Join(xdg, "mcpbox", "projects"), "mcpbox's state root"},
		{filepath.Join(home, ".ssh"), ""},
		{filepath.Join(tmp, "other"), ""},
	} {
		err := hideHome(mount(tt.src))
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("mount of %s: %v, want %q", tt.src, err, tt.want)
		}
		err = hideHome(&sandbox.Spec{Output: tt.src})
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("output %s: %v, want %q", tt.src, err, tt.want)
		}
	}
	// A mount of the home, which holds the state dir too, is refused for
	// the home: moving state_dir away would not make it pass.
	inHome := filepath.Join(home, "state")
	if err := os.MkdirAll(inHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := checkReach(mount(home), Options{StateDir: inHome}); err == nil || !strings.Contains(err.Error(), "is or holds your home directory") {
		t.Errorf("a mount of the home holding the state dir: %v, want the home named", err)
	}
	// A writable output is refused before it is made, with the config's
	// state dir elsewhere too (workspace.Protected.Root).
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nstate_dir: ./state\nservers:\n  s:\n    command: [x]\n    filesystem: {output: {source: "+filepath.Join(xdg, "mcpbox", "new")+"}}\n    tools: {allow: ['*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Server(c, c.Server("s"), Options{Base: filepath.Join(tmp, "other"), StateDir: filepath.Join(tmp, "other")}); err == nil || !strings.Contains(err.Error(), "mcpbox's state root") {
		t.Errorf("an output in the state root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(xdg, "mcpbox", "new")); err == nil {
		t.Error("the refused output dir was made")
	}
	// exec --policy and run --policy refuse the same.
	cfg := filepath.Join(home, "mcpbox.yaml")
	c, err = config.Load(cfg, []byte("version: 1\nservers:\n  s:\n    command: [x]\n    filesystem: {input: {source: .}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Policy(c, cfg); err == nil || !strings.Contains(err.Error(), "is or holds your home directory") {
		t.Errorf("--policy with the home dir as input: %v", err)
	}
}

// TestHideHomeStateRootNotMadeYet: with the home dir a symlink and no
// state root made yet, a mount of the real place that would hold it is
// refused too.
func TestHideHomeStateRootNotMadeYet(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "disk", "me")
	if err := os.MkdirAll(filepath.Join(real, ".local"), 0o700); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	if err := os.Symlink(real, home); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	err := hideHome(&sandbox.Spec{Mounts: []sandbox.Mount{{Source: filepath.Join(real, ".local"), Target: "/data"}}})
	if err == nil || !strings.Contains(err.Error(), "mcpbox's state root") {
		t.Fatalf("a mount of the real dir that will hold the state root: %v", err)
	}
}

// TestHostFileProtected: the audit's JSONL copy, whose records hold
// strings clients and servers choose, is refused where a writable mount
// is (a dir whose files a shell sources, a credential dir, a .git dir),
// before its dir is made; one in the project is made.
func TestHostFileProtected(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	proj := filepath.Join(home, "proj")
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"~/.bashrc.d/mcpbox.jsonl", "~/.ssh/audit.jsonl", "./.git/audit.jsonl", "/etc/mcpbox-audit.jsonl"} {
		if got, err := HostFile(proj, p); !errors.Is(err, workspace.ErrProtected) {
			t.Errorf("HostFile(%s) = %q, %v; want ErrProtected", p, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".bashrc.d")); err == nil {
		t.Error("the refused file's dir was made")
	}
	if got, err := HostFile(proj, "logs/audit.jsonl"); err != nil || got != filepath.Join(proj, "logs", "audit.jsonl") {
		t.Errorf("HostFile(logs/audit.jsonl) = %q, %v", got, err)
	}
}
