package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gitScript attacks the .git of the repositories in the writable mounts:
// the output is a repository, /work/src holds one (a) beside a plain dir
// (b), and /work/wt is a worktree whose .git is a gitdir file.
const gitScript = `try() { if eval "$2" 2>/dev/null; then echo "$1: allowed"; else echo "$1: denied"; fi; }
cd /workspace/output
try "config" 'echo "[core] fsmonitor = touch /tmp/pwned" >> .git/config'
try "hook" 'echo "#!/bin/sh" > .git/hooks/post-index-change'
try "commondir" 'echo ../evil > .git/commondir'
try "move .git" 'mv .git moved'
try "remove .git" 'rm -rf .git'
try "worktree" 'echo changed > file.txt'
cd /work/src
try "nested config" 'echo x >> a/.git/config'
try "move repo" 'mv a a2'
try "nested worktree" 'echo changed > a/file.txt'
try "plain dir" 'echo new > b/file.txt'
try "gitdir file" 'echo "gitdir: /work/src/b" > /work/wt/.git'
echo "output: $(cat /workspace/output/file.txt) $(ls -A /workspace/output | tr '\n' ' ')"
`

// gitRepo makes dir a repository as far as holdGit is concerned: a .git
// with a config and a hooks dir, and one tracked file.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for name, content := range map[string]string{".git/config": "[core]\n", ".git/hooks/README": "", "file.txt": "orig\n"} {
		if err := os.MkdirAll(filepath.Dir(dir+"/"+name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func gitDirs(t *testing.T) (out, src, wt string) {
	t.Helper()
	base := t.TempDir()
	out, src, wt = base+"/out", base+"/src", base+"/wt"
	gitRepo(t, out)
	gitRepo(t, src+"/a")
	if err := os.MkdirAll(src+"/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wt+"/.git", []byte("gitdir: /elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return out, src, wt
}

// TestGitHeldReadOnly: in the writable mounts the .git of a repository
// (at the mount's root, directly in it, or a gitdir file) is read-only,
// and the workload can neither move it nor move its repository aside to
// put another in its place; the worktrees stay writable. Before, a
// writable mount of a repository let the sandbox add a hook or a
// core.fsmonitor command that ran at the user's next git command.
func TestGitHeldReadOnly(t *testing.T) {
	requireSandbox(t)
	out, src, wt := gitDirs(t)
	spec := quick("sh", "-c", gitScript)
	spec.Output = out
	spec.Mounts = []Mount{{Source: src, Target: "/work/src", Writable: true}, {Source: wt, Target: "/work/wt", Writable: true}}
	want := `config: denied
hook: denied
commondir: denied
move .git: denied
remove .git: denied
worktree: allowed
nested config: denied
move repo: denied
nested worktree: allowed
plain dir: allowed
gitdir file: denied
output: changed .git file.txt 
`
	if d := cmp.Diff(want, runOverlay(t, spec)); d != "" {
		t.Errorf("workload's view (-want +got):\n%s", d)
	}
	for _, p := range []string{out + "/.git/config", src + "/a/.git/config"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "[core]\n" {
			t.Errorf("%s on the host: %q, %v", p, b, err)
		}
	}
	for _, p := range []string{out + "/.git/hooks/post-index-change", out + "/.git/commondir", src + "/a2"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	if b, err := os.ReadFile(wt + "/.git"); err != nil || string(b) != "gitdir: /elsewhere\n" {
		t.Errorf("%s/.git on the host: %q, %v", wt, b, err)
	}
}

// TestGitKeptWritable: a mount with KeepGit leaves .git as writable as the
// rest.
func TestGitKeptWritable(t *testing.T) {
	requireSandbox(t)
	out, _, _ := gitDirs(t)
	spec := quick("sh", "-c", `echo "[user]" >> /work/repo/.git/config && echo ok`)
	spec.Mounts = []Mount{{Source: out, Target: "/work/repo", Writable: true, KeepGit: true}}
	if got := runOverlay(t, spec); got != "ok\n" {
		t.Errorf("workload: %q", got)
	}
	if b, _ := os.ReadFile(out + "/.git/config"); string(b) != "[core]\n[user]\n" {
		t.Errorf(".git/config on the host: %q", b)
	}
}

// TestGitLinkRefused: a repository at a writable mount's root whose .git
// is a symlink stops the start (a link cannot be held read-only), with a
// message that names it; one in a dir directly in the mount is left
// alone, as a repository the workload made would be (else a link it
// plants there would stop every later start).
func TestGitLinkRefused(t *testing.T) {
	requireSandbox(t)
	base := t.TempDir()
	gitRepo(t, base+"/real")
	for _, d := range []string{"/out/a", "/out2"} {
		if err := os.MkdirAll(base+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"/out/a/.git", "/out2/.git"} {
		if err := os.Symlink(base+"/real/.git", base+l); err != nil {
			t.Fatal(err)
		}
	}
	spec := quick("true")
	spec.Output = base + "/out"
	if res, err := Run(context.Background(), spec, Stdio{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("a .git link in a dir of the output: %v %+v", err, res)
	}
	spec.Output = base + "/out2"
	var errb bytes.Buffer
	_, err := Run(context.Background(), spec, Stdio{Stderr: &errb})
	if err == nil || !strings.Contains(err.Error(), "/out2/.git is a symbolic link") {
		t.Fatalf("Run: %v (stderr %q), want the link named", err, errb.String())
	}
}

// TestGitHeldUnprivileged runs the .git tests as an unprivileged user,
// the other way the sandbox maps uids, when the tests run as root.
func TestGitHeldUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: TestGitHeldReadOnly already runs unprivileged")
	}
	runUnprivileged(t, "TestGitHeldReadOnly", "TestGitKeptWritable", "TestGitLinkRefused", "TestGitWhereItLeads", "TestGitHoldRefusals", "TestGitWorktreeBeforeMain", "TestGitUnreadableDirIgnored")
}

// gitCmd runs git on the host in dir, as a user with a name would.
func gitCmd(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
}

// gitWhere is what git reads beside .git, as the review of holdGit found
// it writable: a submodule two levels down, an uninitialised submodule, a
// separate gitdir, core.hooksPath and an included config in the worktree.
const gitWhereScript = `try() { if eval "$2" 2>/dev/null; then echo "$1: allowed"; else echo "$1: denied"; fi; }
cd /work/src
try "deep submodule .git" 'echo x >> proj/libs/lib/.git'
try "deep submodule moved" 'mv proj/libs proj/libs2'
try "uninitialised submodule" 'mkdir clone/libs/lib/.git'
try "separate gitdir" 'echo x >> a.gitdir/config'
try "hooks path" 'echo x > hp/.githooks/pre-commit'
try "included config" 'echo x >> hp/.gitconfig.shared'
try "linked hook" 'echo x >> proj/tools/hook'
try "hooks path through a link" 'echo x > hp2/.githooks/pre-commit'
try "submodule of the repository above" 'mkdir /work/vendor/lib/.git'
try "submodule of a linked repository above" 'mkdir /work/vendor2/lib/.git'
try "include of an include" 'echo x >> hp3/local.cfg'
try "worktree" 'echo y > proj/README'
`

// TestGitWhereItLeads: what a held repository's .git leads git to is
// held too, when it lies in a writable mount: a submodule at any depth
// (git status enters it), an uninitialised submodule's empty dir (else
// the sandbox could make a repository there), the dir a .git file names,
// the core.hooksPath dir and included config files. Before, each let the
// sandbox run code at the user's next git status or commit.
func TestGitWhereItLeads(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	base := t.TempDir()
	src := base + "/src"
	for _, d := range []string{base + "/lib", src + "/proj/libs", src + "/hp/.githooks"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(base+"/lib/f", "x\n")
	gitCmd(t, base+"/lib", "init", "-q")
	gitCmd(t, base+"/lib", "add", "f")
	gitCmd(t, base+"/lib", "commit", "-qm", "l")
	write(src+"/proj/README", "hi\n")
	gitCmd(t, src+"/proj", "init", "-q")
	gitCmd(t, src+"/proj", "submodule", "-q", "add", base+"/lib", "libs/lib")
	gitCmd(t, src+"/proj", "submodule", "-q", "add", base+"/lib", "vendor/lib")
	gitCmd(t, src+"/proj", "add", ".")
	gitCmd(t, src+"/proj", "commit", "-qm", "init")
	gitCmd(t, src, "clone", "-q", src+"/proj", "clone") // not --recursive: libs/lib is empty
	gitCmd(t, base, "init", "-q", "--separate-git-dir="+src+"/a.gitdir", src+"/a")
	write(src+"/hp/.gitconfig.shared", "")
	gitCmd(t, src+"/hp", "init", "-q")
	gitCmd(t, src+"/hp", "config", "core.hooksPath", ".githooks")
	gitCmd(t, src+"/hp", "config", "include.path", "../.gitconfig.shared")
	// A hook that is a link into the worktree, as hook managers make.
	if err := os.MkdirAll(src+"/proj/tools", 0o755); err != nil {
		t.Fatal(err)
	}
	write(src+"/proj/tools/hook", "#!/bin/sh\n")
	if err := os.Symlink("../../tools/hook", src+"/proj/.git/hooks/pre-commit"); err != nil {
		t.Fatal(err)
	}
	// An absolute hooks path through a link to the mount's source.
	if err := os.Symlink(src, base+"/srclink"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(src+"/hp2/.githooks", 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, src+"/hp2", "init", "-q")
	gitCmd(t, src+"/hp2", "config", "core.hooksPath", base+"/srclink/hp2/.githooks")
	// A mount of a dir of a repository (outer), whose uninitialised
	// submodule vendor/lib lies in it: git status in outer enters it.
	gitCmd(t, base, "clone", "-q", src+"/proj", "outer")
	// The same, the repository above's .git a link to its dir.
	gitCmd(t, base, "clone", "-q", src+"/proj", "outer2")
	if err := os.Rename(base+"/outer2/.git", base+"/outer2.git"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base+"/outer2.git", base+"/outer2/.git"); err != nil {
		t.Fatal(err)
	}
	// An include, through a link in the held .git, whose own relative
	// include git takes from the link's dir: hp3/.git/../local.cfg.
	if err := os.MkdirAll(base+"/elsewhere", 0o755); err != nil {
		t.Fatal(err)
	}
	write(base+"/elsewhere/shared.cfg", "[include]\n\tpath = ../local.cfg\n")
	if err := os.MkdirAll(src+"/hp3", 0o755); err != nil {
		t.Fatal(err)
	}
	write(src+"/hp3/local.cfg", "")
	gitCmd(t, src+"/hp3", "init", "-q")
	if err := os.Symlink(base+"/elsewhere/shared.cfg", src+"/hp3/.git/shared.cfg"); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, src+"/hp3", "config", "include.path", "shared.cfg")
	spec := quick("sh", "-c", gitWhereScript)
	spec.Mounts = []Mount{{Source: src, Target: "/work/src", Writable: true}, {Source: base + "/outer/vendor", Target: "/work/vendor", Writable: true},
		{Source: base + "/outer2/vendor", Target: "/work/vendor2", Writable: true}}
	want := `deep submodule .git: denied
deep submodule moved: denied
uninitialised submodule: denied
separate gitdir: denied
hooks path: denied
included config: denied
linked hook: denied
hooks path through a link: denied
submodule of the repository above: denied
submodule of a linked repository above: denied
include of an include: denied
worktree: allowed
`
	if d := cmp.Diff(want, runOverlay(t, spec)); d != "" {
		t.Errorf("workload's view (-want +got):\n%s", d)
	}
}

// TestGitHoldRefusals: what holdGit cannot hold stops the start, with a
// message that says why: writable mounts whose sources nest (a repository
// held in one would be writable through the other), a core.hooksPath
// missing in the mount (the sandbox could make it), more mounts than it
// makes.
func TestGitHoldRefusals(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	base := t.TempDir()
	gitRepo(t, base+"/code/group/proj")
	if err := os.MkdirAll(base+"/hp", 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, base+"/hp", "init", "-q")
	gitCmd(t, base+"/hp", "config", "core.hooksPath", ".githooks")
	// A hooks path through a link in the worktree, which the sandbox
	// could point elsewhere.
	if err := os.MkdirAll(base+"/hl/.githooks-real", 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, base+"/hl", "init", "-q")
	if err := os.Symlink(".githooks-real", base+"/hl/.githooks"); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, base+"/hl", "config", "core.hooksPath", ".githooks")
	// An uninitialised submodule's dir as the mount.
	if err := os.MkdirAll(base+"/lib", 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, base+"/lib", "init", "-q")
	gitCmd(t, base+"/lib", "commit", "-q", "--allow-empty", "-m", "l")
	if err := os.MkdirAll(base+"/sp", 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, base+"/sp", "init", "-q")
	gitCmd(t, base+"/sp", "submodule", "-q", "add", base+"/lib", "m/lib")
	gitCmd(t, base+"/sp", "commit", "-qm", "s")
	gitCmd(t, base, "clone", "-q", base+"/sp", "spc")
	for i := range gitMountsForTest/2 + 1 { // each costs two mounts: its dir and its .git
		if err := os.MkdirAll(fmt.Sprintf("%s/many/d%d/.git", base, i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		mounts []Mount
		want   string
	}{
		{"nested sources", []Mount{{Source: base + "/code/group/proj", Target: "/work/proj", Writable: true}, {Source: base + "/code", Target: "/work/code", Writable: true}},
			"the writable mounts /work/proj (" + base + "/code/group/proj) and /work/code (" + base + "/code) overlap"},
		{"file mount in a writable mount", []Mount{{Source: base + "/hp", Target: "/work/hp", Writable: true}, {Source: base + "/hp/.git/config", Target: "/work/cfg", Writable: true}},
			"the writable mounts /work/hp (" + base + "/hp) and /work/cfg (" + base + "/hp/.git/config) overlap"},
		{"hooks path through a link", []Mount{{Source: base + "/hl", Target: "/work/hl", Writable: true}},
			"is reached through the symbolic link " + base + "/hl/.githooks in a writable mount"},
		{"uninitialised submodule as the mount", []Mount{{Source: base + "/spc/m/lib", Target: "/work/lib", Writable: true}},
			"the mount's source is the uninitialised submodule m/lib of " + base + "/spc"},
		{"hooks path missing", []Mount{{Source: base + "/hp", Target: "/work/hp", Writable: true}},
			"core.hookspath in " + base + "/hp/.git/config names " + base + "/hp/.githooks, which is missing in a writable mount"},
		{"too many repositories", []Mount{{Source: base + "/many", Target: "/work/many", Writable: true}},
			fmt.Sprintf("more than %d mounts to hold its repositories", gitMountsForTest)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := quick("true")
			spec.Mounts = tt.mounts
			_, err := Run(context.Background(), spec, Stdio{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// gitMountsForTest is initproc's maxGitMounts.
const gitMountsForTest = 4000

// TestGitWorktreeBeforeMain: a worktree at the output's root whose main
// repository lies in a mount is planned first; the main repository's
// .git, made a mount point on the way to the worktree's gitdir, is held
// read-only all the same (the review found it left writable).
func TestGitWorktreeBeforeMain(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	base := t.TempDir()
	if err := os.MkdirAll(base+"/src/main", 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, base+"/src/main", "init", "-q")
	gitCmd(t, base+"/src/main", "commit", "-q", "--allow-empty", "-m", "i")
	gitCmd(t, base+"/src/main", "worktree", "add", "-q", base+"/wt")
	spec := quick("sh", "-c", `if echo x >> /work/src/main/.git/config 2>/dev/null; then echo allowed; else echo denied; fi`)
	spec.Output = base + "/wt"
	spec.Mounts = []Mount{{Source: base + "/src", Target: "/work/src", Writable: true}}
	if got := runOverlay(t, spec); got != "denied\n" {
		t.Errorf("writing the main repository's config: %q, want denied", got)
	}
}

// BenchmarkRunSandboxOutput is a sandbox's start and end with an output
// dir that is a plain dir, and one that is a repository of 2,000 files
// with a submodule (what planGit reads and the init holds), in the same
// run:
//
//	go test ./internal/sandbox -run '^$' -bench RunSandboxOutput -count 10
func BenchmarkRunSandboxOutput(b *testing.B) {
	if probeHost().usernsErr != nil {
		b.Skip("user namespaces unavailable")
	}
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("no git here")
	}
	base := b.TempDir()
	repo := base + "/repo"
	for i := range 2000 {
		p := fmt.Sprintf("%s/d%d/f%d", repo, i%50, i)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.MkdirAll(base+"/lib", 0o755); err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{{"-C", base + "/lib", "init", "-q"}, {"-C", base + "/lib", "commit", "-q", "--allow-empty", "-m", "l"},
		{"-C", repo, "init", "-q"}, {"-C", repo, "add", "."}, {"-C", repo, "submodule", "-q", "add", base + "/lib", "sub"}} {
		gitCmd(b, base, args...)
	}
	if err := os.Mkdir(base+"/plain", 0o755); err != nil {
		b.Fatal(err)
	}
	for _, out := range []string{"plain", "repo"} {
		b.Run(out, func(b *testing.B) {
			spec := quick("/bin/true")
			spec.Output = base + "/" + out
			for b.Loop() {
				if res, err := Run(context.Background(), spec, Stdio{}); err != nil || res.ExitCode != 0 {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}

// TestGitUnreadableDirIgnored: a dir in the output the user cannot read
// (a workload's chmod 0) does not stop later starts: git cannot use a
// repository there either. (Meaningful as an unprivileged user.)
func TestGitUnreadableDirIgnored(t *testing.T) {
	requireSandbox(t)
	out := t.TempDir()
	if err := os.Mkdir(out+"/x", 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(out+"/x", 0o700) })
	spec := quick("true")
	spec.Output = out
	if res, err := Run(context.Background(), spec, Stdio{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("a start with an unreadable dir in the output: %v %+v", err, res)
	}
}
