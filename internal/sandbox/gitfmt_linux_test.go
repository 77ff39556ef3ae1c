package sandbox

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
		gitCmd(t, lib, "init", "-q", "--object-format="+format)
		gitCmd(t, lib, "commit", "-q", "--allow-empty", "-m", "l")
		gitCmd(t, repo, "init", "-q", "--object-format="+format)
		for _, f := range []string{"a/b/file1", "a/b/file2", "a/new", "z"} {
			if err := os.WriteFile(filepath.Join(repo, f), []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		gitCmd(t, repo, "add", "a/b/file1", "a/b/file2", "z")
		gitCmd(t, repo, "add", "-N", "a/new") // an extended flag (intent to add)
		for _, sub := range []string{"a/b/sub", "a/sub2", "top"} {
			gitCmd(t, repo, "submodule", "-q", "add", lib, sub)
		}
		hashLen := map[string]int{"sha1": 20, "sha256": 32}[format]
		for _, v := range []string{"2", "3", "4"} {
			gitCmd(t, repo, "update-index", "--index-version", v)
			data, err := os.ReadFile(filepath.Join(repo, ".git/index"))
			if err != nil {
				t.Fatal(err)
			}
			got, shared, err := gitlinks(data, hashLen)
			if err != nil || shared != nil {
				t.Fatalf("%s index v%s: %v, shared index %x", format, v, err, shared)
			}
			slices.Sort(got)
			if d := cmp.Diff([]string{"a/b/sub", "a/sub2", "top"}, got); d != "" {
				t.Errorf("%s index v%s gitlinks (-want +got):\n%s", format, v, d)
			}
		}
		// A sparse checkout's submodule (skip-worktree) is not entered;
		// a split index keeps the others in its shared index.
		gitCmd(t, repo, "update-index", "--skip-worktree", "top")
		gitCmd(t, repo, "update-index", "--split-index")
		data, err := os.ReadFile(filepath.Join(repo, ".git/index"))
		if err != nil {
			t.Fatal(err)
		}
		got, shared, err := gitlinks(data, hashLen)
		if err != nil || shared == nil {
			t.Fatalf("%s split index: %v, shared index %x", format, err, shared)
		}
		data, err = os.ReadFile(filepath.Join(repo, ".git", "sharedindex."+hex.EncodeToString(shared)))
		if err != nil {
			t.Fatal(err)
		}
		more, _, err := gitlinks(data, hashLen)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, more...)
		slices.Sort(got)
		if d := cmp.Diff([]string{"a/b/sub", "a/sub2"}, slices.Compact(got)); d != "" {
			t.Errorf("%s split index with top skip-worktree: gitlinks (-want +got):\n%s", format, d)
		}
	}
}

// TestGitConfig reads the keys holdGit follows as git would, after a
// byte order mark too.
func TestGitConfig(t *testing.T) {
	in := "\xef\xbb\xbf" + `# comment
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
		_, _, _ = gitlinks(data, 20+hashLen&12)
		_ = gitConfig(data)
	})
}
