package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSystem lays out executable directories as on a merged /usr (bin ->
// usr/bin) and a workspace dir with its own programs, and returns the
// root, the executable directories and the workspace dir.
func fakeSystem(t *testing.T) (root string, dirs []string, ws string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	exe := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho \"$0 $*\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"git", "env", "rm", "ls", "nice", "sh"} {
		exe(filepath.Join(root, "usr/bin", name))
	}
	link("usr/bin", filepath.Join(root, "bin"))
	ws = filepath.Join(root, "ws")
	exe(filepath.Join(ws, "git"))      // a workspace program named like a system one
	exe(filepath.Join(ws, "build.sh")) // named by a path rule
	link(filepath.Join(root, "usr/bin/git"), filepath.Join(ws, "lnk"))
	link(filepath.Join(root, "usr/bin/rm"), filepath.Join(ws, "ls")) // "./ls" is rm
	return root, []string{filepath.Join(root, "usr/bin"), filepath.Join(root, "bin")}, ws
}

// TestCommandPolicySpellings attacks the policy with every spelling of a
// denied command: allow and deny must see the same program.
func TestCommandPolicySpellings(t *testing.T) {
	root, dirs, ws := fakeSystem(t)
	p := CommandPolicy{
		Allow: []string{"git", "env *", "nice *", "sh", "ls", "./build.sh *"},
		Deny:  []string{"git *push*", "rm"},
		dirs:  dirs,
	}
	r := func(s string) string { return strings.ReplaceAll(s, "R/", root+"/") }
	tests := []struct {
		name string
		argv string
		want verdict
	}{
		{"bare name", "git push origin", refused},
		{"absolute path", "R/usr/bin/git push", refused},
		{"absolute path, options first", "R/usr/bin/git -C sub/dir push", refused},
		{"through a directory symlink", "R/bin/git push", refused},
		{"dot-dot in an absolute path", "R/usr/bin/../bin/git push", refused},
		{"relative dot-dot", "../usr/bin/git push", refused},
		{"workspace symlink to the system program", "./lnk push", refused},
		{"workspace program of the same name", "./git push", refused},
		{"env wrapper", "env git push", refused},
		{"env wrapper with options and a path", "env -i A=1 R/usr/bin/git push", refused},
		{"wrapper by path", "R/bin/env R/bin/git push", refused},
		{"nested wrappers", "nice -n 5 env git push", refused},
		{"shell -c", "sh -c git~push~origin", refused},
		{"shell -c allowed", "sh -c git~log", allowed},
		{"denied program by path", "R/usr/bin/rm -rf x", refused},
		{"denied program through a workspace symlink", "./ls -rf x", refused},

		{"allowed bare name", "git log", allowed},
		{"allowed absolute path", "R/usr/bin/git log", allowed},
		{"allowed through a directory symlink", "R/bin/git log", allowed},
		{"allowed with dot-dot", "R/usr/bin/../bin/git log", allowed},
		{"allowed wrapper", "env git log", allowed},
		{"workspace program not named by a rule", "./git log", refused},
		{"workspace program by absolute path", "R/ws/git log", refused},
		{"dot-dot out of the executable dirs", "R/usr/bin/../../ws/git log", refused},
		{"workspace program named by a path rule", "./build.sh all", allowed},
		{"path rule names its own spelling only", "R/ws/sub/../build.sh all", refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := strings.Fields(r(tt.argv))
			for i := range argv {
				argv[i] = strings.ReplaceAll(argv[i], "~", " ") // a space within one word
			}
			d := p.check(argv, ws)
			if d.v != tt.want {
				t.Errorf("check(%q) = %v (rule %q, program %+v), want %v", argv, d.v, d.rule, d.prog, tt.want)
			}
		})
	}

	// Without a deny rule for rm, an allow rule for ls must not let a
	// workspace symlink named ls run rm.
	p2 := CommandPolicy{Allow: []string{"ls"}, dirs: dirs}
	for _, argv0 := range []string{"./ls", filepath.Join(ws, "ls"), filepath.Join(dirs[0], "../../ws/ls")} {
		if d := p2.check([]string{argv0, "-rf", "x"}, ws); d.v != refused {
			t.Errorf("%s (a symlink to rm) allowed by rule %q", argv0, d.rule)
		}
	}
}

// TestCommandPolicyRunsResolved checks that the file the policy decided on
// is the one that runs, and that a refusal names the program and no host
// path.
func TestCommandPolicyRunsResolved(t *testing.T) {
	_, dirs, ws := fakeSystem(t)
	p := CommandPolicy{Allow: []string{"git", "./build.sh"}, dirs: dirs}
	d := p.check([]string{"git", "log"}, ws)
	if d.v != allowed || d.prog.path != filepath.Join(dirs[0], "git") {
		t.Fatalf("git: %v, runs %q; want allowed, %s", d.v, d.prog.path, filepath.Join(dirs[0], "git"))
	}
	d = p.check([]string{"./git", "log"}, ws)
	err := p.policyError([]string{"./git", "log"}, d)
	if err == nil || !strings.Contains(err.Error(), `program "./git" is outside the sandbox's executable directories`) {
		t.Fatalf("./git: %v", err)
	}
}

func TestLineMatchCrossesSlashes(t *testing.T) {
	p := CommandPolicy{Allow: []string{"git", "cat *"}, Deny: []string{"git *push*"}}
	tests := []struct {
		argv []string
		want verdict
	}{
		{[]string{"git", "push", "origin", "feature/x"}, refused},
		{[]string{"git", "-C", "sub/dir", "push"}, refused},
		{[]string{"git", "log", "--oneline"}, allowed},
		{[]string{"cat", "src/main.go"}, allowed},
		{[]string{"/workspace/input/evil/git", "log"}, refused}, // not the system's git
		{[]string{"/usr/bin/git", "log"}, allowed},
		{[]string{"/usr/bin/git", "push"}, refused},
		{[]string{"/usr/bin/../../workspace/input/git", "log"}, refused},
	}
	for _, tt := range tests {
		if d := p.check(tt.argv, "/"); d.v != tt.want {
			t.Errorf("%q: verdict %v (rule %q), want %v", tt.argv, d.v, d.rule, tt.want)
		}
	}
}
