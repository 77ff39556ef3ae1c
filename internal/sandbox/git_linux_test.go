package sandbox

import (
	"bytes"
	"context"
	"os"
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

// TestGitLinkRefused: a writable mount's repository whose .git is a
// symlink stops the start (a link cannot be held read-only), with a
// message that names it.
func TestGitLinkRefused(t *testing.T) {
	requireSandbox(t)
	base := t.TempDir()
	gitRepo(t, base+"/real")
	if err := os.MkdirAll(base+"/out/a", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base+"/real/.git", base+"/out/a/.git"); err != nil {
		t.Fatal(err)
	}
	spec := quick("true")
	spec.Output = base + "/out"
	var errb bytes.Buffer
	_, err := Run(context.Background(), spec, Stdio{Stderr: &errb})
	if err == nil || !strings.Contains(err.Error(), "a/.git is a symbolic link") {
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
	runUnprivileged(t, "TestGitHeldReadOnly", "TestGitKeptWritable", "TestGitLinkRefused")
}
