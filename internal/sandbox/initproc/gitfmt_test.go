package initproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestGitlinks reads the submodules of indexes git writes, in each
// version it writes (4 compresses paths against the one before, 3 has
// the extended flags of an intent-to-add entry), with SHA-1 and SHA-256.
func TestGitlinks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	for _, format := range []string{"sha1", "sha256"} {
		base := t.TempDir()
		lib, repo := filepath.Join(base, "lib"), filepath.Join(base, "repo")
		for _, d := range []string{lib, filepath.Join(repo, "a/b")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		gitRun(t, lib, "init", "-q", "--object-format="+format)
		gitRun(t, lib, "commit", "-q", "--allow-empty", "-m", "l")
		gitRun(t, repo, "init", "-q", "--object-format="+format)
		for _, f := range []string{"a/b/file1", "a/b/file2", "a/new", "z"} {
			if err := os.WriteFile(filepath.Join(repo, f), []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		gitRun(t, repo, "add", "a/b/file1", "a/b/file2", "z")
		gitRun(t, repo, "add", "-N", "a/new") // an extended flag (intent to add)
		for _, sub := range []string{"a/b/sub", "a/sub2", "top"} {
			gitRun(t, repo, "submodule", "-q", "add", lib, sub)
		}
		hashLen := map[string]int{"sha1": 20, "sha256": 32}[format]
		for _, v := range []string{"2", "3", "4"} {
			gitRun(t, repo, "update-index", "--index-version", v)
			data, err := os.ReadFile(filepath.Join(repo, ".git/index"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := gitlinks(data, hashLen)
			if err != nil {
				t.Fatalf("%s index v%s: %v", format, v, err)
			}
			slices.Sort(got)
			if d := cmp.Diff([]string{"a/b/sub", "a/sub2", "top"}, got); d != "" {
				t.Errorf("%s index v%s gitlinks (-want +got):\n%s", format, v, d)
			}
		}
	}
}

// TestGitConfig reads the keys holdGit follows as git would.
func TestGitConfig(t *testing.T) {
	in := `# comment
[core]
	hooksPath = ".husky/_" ; trailing
	bare
[Include]
	PATH = ../shared.cfg
[includeIf "gitdir:~/work/"]
	path = "we\"ird.cfg"
[remote.origin] url = x
`
	want := [][2]string{
		{"core.hookspath", ".husky/_"},
		{"core.bare", "true"},
		{"include.path", "../shared.cfg"},
		{"includeif.gitdir:~/work/.path", `we"ird.cfg`},
		{"remote.origin.url", "x"},
	}
	if d := cmp.Diff(want, gitConfig([]byte(in))); d != "" {
		t.Errorf("gitConfig (-want +got):\n%s", d)
	}
}

// FuzzGitlinks: no index, however malformed, panics the reader or makes
// it loop.
func FuzzGitlinks(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), 20)
	f.Add([]byte("DIRC\x00\x00\x00\x04\xff\xff\xff\xff"), 32)
	f.Fuzz(func(t *testing.T, data []byte, hashLen int) {
		_, _ = gitlinks(data, 20+hashLen&12)
		_ = gitConfig(data)
	})
}
