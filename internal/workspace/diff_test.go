//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	return b.String()
}

func TestDiff(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	write(t, filepath.Join(lower, "changed.txt"), numbered(1, 10), 0o644)
	write(t, filepath.Join(lower, "same.txt"), "same\n", 0o644)
	write(t, filepath.Join(lower, "untouched"), "u\n", 0o644)
	write(t, filepath.Join(lower, "gone.txt"), "bye\n", 0o644)
	write(t, filepath.Join(lower, "gonedir/x"), "x1\n", 0o644)
	write(t, filepath.Join(lower, "gonedir/y"), "y1\ny2\n", 0o644)
	write(t, filepath.Join(lower, "opq/old.txt"), "old\n", 0o644)
	write(t, filepath.Join(lower, "opq/kept.txt"), "lower kept\n", 0o644)
	write(t, filepath.Join(lower, "bin.dat"), "\x00\x01", 0o644)
	write(t, filepath.Join(lower, "tofile/inner"), "inner\n", 0o644)
	symlink(t, "a", filepath.Join(lower, "link"))
	write(t, filepath.Join(lower, "emptied.txt"), "x\n", 0o644)
	write(t, filepath.Join(lower, "gone-empty"), "", 0o644)
	write(t, filepath.Join(lower, "run.sh"), "echo\n", 0o644)
	write(t, filepath.Join(lower, ".git/config"), "[core]\n", 0o644)
	write(t, filepath.Join(lower, ".git/HEAD"), "ref: refs/heads/main\n", 0o644)

	write(t, filepath.Join(upper, "emptied.txt"), "", 0o644)
	write(t, filepath.Join(upper, "new-empty"), "", 0o644)
	write(t, filepath.Join(upper, "run.sh"), "echo\n", 0o755)
	write(t, filepath.Join(upper, ".git/config"), "[core]\nfsmonitor = evil\n", 0o644)
	write(t, filepath.Join(upper, ".git/hooks/pre-commit"), "evil\n", 0o755)
	write(t, filepath.Join(upper, "sub/.git"), "gitdir: /elsewhere\n", 0o644)
	mknodWhiteout(t, filepath.Join(upper, "gone-empty"))

	write(t, filepath.Join(upper, "changed.txt"), strings.Replace(numbered(1, 11), "5\n", "five\n", 1), 0o644)
	write(t, filepath.Join(upper, "same.txt"), "same\n", 0o600)
	write(t, filepath.Join(upper, "new.txt"), "hello\nworld", 0o644)
	write(t, filepath.Join(upper, "newdir/f"), "n\n", 0o644)
	write(t, filepath.Join(upper, "bin.dat"), "\x00\x02", 0o644)
	write(t, filepath.Join(upper, "tofile"), "now a file\n", 0o644)
	write(t, filepath.Join(upper, "opq/kept.txt"), "upper kept\n", 0o644)
	write(t, filepath.Join(upper, "opq/fresh.txt"), "fresh\n", 0o644)
	symlink(t, "b", filepath.Join(upper, "link"))
	if err := os.WriteFile(filepath.Join(upper, "big"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(upper, "big"), 9<<20); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(upper, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	mknodWhiteout(t, filepath.Join(upper, "gone.txt"))
	mknodWhiteout(t, filepath.Join(upper, "gonedir"))
	mknodWhiteout(t, filepath.Join(upper, "orphan"))
	setOpaque(t, filepath.Join(upper, "opq"))

	want := `Changes under .git not shown (git's own files; git apply refuses them): .git/config, .git/hooks/pre-commit
Files /dev/null and b/big differ
Binary files a/bin.dat and b/bin.dat differ
diff --git a/changed.txt b/changed.txt
--- a/changed.txt
+++ b/changed.txt
@@ -2,9 +2,10 @@
 2
 3
 4
-5
+five
 6
 7
 8
 9
 10
+11
diff --git a/emptied.txt b/emptied.txt
--- a/emptied.txt
+++ b/emptied.txt
@@ -1 +0,0 @@
-x
diff --git a/gone-empty b/gone-empty
deleted file mode 100644
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/gonedir/x b/gonedir/x
deleted file mode 100644
--- a/gonedir/x
+++ /dev/null
@@ -1 +0,0 @@
-x1
diff --git a/gonedir/y b/gonedir/y
deleted file mode 100644
--- a/gonedir/y
+++ /dev/null
@@ -1,2 +0,0 @@
-y1
-y2
Symbolic links a/link -> a and b/link -> b differ
diff --git a/new-empty b/new-empty
new file mode 100644
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
\ No newline at end of file
diff --git a/newdir/f b/newdir/f
new file mode 100644
--- /dev/null
+++ b/newdir/f
@@ -0,0 +1 @@
+n
diff --git a/opq/fresh.txt b/opq/fresh.txt
new file mode 100644
--- /dev/null
+++ b/opq/fresh.txt
@@ -0,0 +1 @@
+fresh
diff --git a/opq/kept.txt b/opq/kept.txt
--- a/opq/kept.txt
+++ b/opq/kept.txt
@@ -1 +1 @@
-lower kept
+upper kept
diff --git a/opq/old.txt b/opq/old.txt
deleted file mode 100644
--- a/opq/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-old
Special file b/pipe not compared
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
Changes under sub/.git not shown (git's own files; git apply refuses them): sub/.git
diff --git a/tofile/inner b/tofile/inner
deleted file mode 100644
--- a/tofile/inner
+++ /dev/null
@@ -1 +0,0 @@
-inner
diff --git a/tofile b/tofile
new file mode 100644
--- /dev/null
+++ b/tofile
@@ -0,0 +1 @@
+now a file
`
	var got strings.Builder
	if err := Diff(&got, lower, upper); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
}

// TestDiffApplies: the patch, applied to a copy of the source by git
// apply and by patch -p1 -f (without -f, patch asks before it deletes
// an empty file), makes of it what the overlay made: deleted
// files gone (not left empty), empty files made and removed, the
// executable bit changed, and .git untouched.
func TestDiffApplies(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	write(t, filepath.Join(lower, "changed.txt"), numbered(1, 10), 0o644)
	write(t, filepath.Join(lower, "gone.txt"), "bye\n", 0o644)
	write(t, filepath.Join(lower, "gone-empty"), "", 0o644)
	write(t, filepath.Join(lower, "emptied.txt"), "x\n", 0o644)
	write(t, filepath.Join(lower, "run.sh"), "echo\n", 0o644)
	write(t, filepath.Join(lower, "dir/a"), "a\n", 0o644)
	write(t, filepath.Join(lower, ".git/config"), "[core]\n", 0o644)

	write(t, filepath.Join(upper, "changed.txt"), strings.Replace(numbered(1, 10), "5\n", "five\n", 1), 0o644)
	write(t, filepath.Join(upper, "emptied.txt"), "", 0o644)
	write(t, filepath.Join(upper, "run.sh"), "echo\n", 0o755)
	write(t, filepath.Join(upper, "new.txt"), "hello\nworld", 0o644)
	write(t, filepath.Join(upper, "new-empty"), "", 0o644)
	write(t, filepath.Join(upper, "dir/b"), "b\n", 0o644)
	write(t, filepath.Join(upper, ".git/config"), "[core]\nfsmonitor = evil\n", 0o644)
	mknodWhiteout(t, filepath.Join(upper, "gone.txt"))
	mknodWhiteout(t, filepath.Join(upper, "gone-empty"))
	mknodWhiteout(t, filepath.Join(upper, "dir/a"))
	// Names a hostile sandbox picks: unquoted, patch would end a name at
	// its first space ("sub/.git x" would patch sub/.git, "Makefile x"
	// chmod the Makefile); git refuses .git in any case, with trailing
	// dots, or as git~1, and a removed dir's repository is git's too.
	write(t, filepath.Join(lower, "Makefile"), "all:\n", 0o644)
	write(t, filepath.Join(lower, "nested/file"), "f\n", 0o644)
	write(t, filepath.Join(lower, "nested/.git/config"), "[core]\n", 0o644)
	write(t, filepath.Join(upper, "a b"), "spaced\n", 0o644)
	write(t, filepath.Join(upper, "sub/.git x"), "gitdir: ../evil\n", 0o644)
	write(t, filepath.Join(upper, "Makefile x"), "x\n", 0o755)
	write(t, filepath.Join(upper, "t\tab\"q\\"), "odd\n", 0o644)
	write(t, filepath.Join(upper, "caf\u00e9"), "accent\n", 0o644)
	write(t, filepath.Join(upper, ".GIT/hooks/pre-commit"), "evil\n", 0o755)
	write(t, filepath.Join(upper, "deep/.git./config"), "evil\n", 0o644)
	write(t, filepath.Join(upper, "deep/GIT~1/config"), "evil\n", 0o644)
	mknodWhiteout(t, filepath.Join(upper, "nested"))
	write(t, filepath.Join(upper, ".git::$INDEX_ALLOCATION/x"), "evil\n", 0o644)
	write(t, filepath.Join(upper, ".git\\hooks\\pre-commit"), "evil\n", 0o755)
	// A patch cannot remove a symlink (patch -p1 would write through
	// githooks into .git/hooks) nor a directory it leaves a repository in
	// (git apply would stop half-way): neither is in the patch.
	write(t, filepath.Join(lower, ".git/hooks/sample"), "s\n", 0o644)
	symlink(t, ".git/hooks", filepath.Join(lower, "githooks"))
	write(t, filepath.Join(upper, "githooks/pre-commit"), "evil\n", 0o755)
	write(t, filepath.Join(lower, "vendor/lib/.git/config"), "[core]\n", 0o644)
	write(t, filepath.Join(lower, "vendor/lib/src.c"), "int x;\n", 0o644)
	write(t, filepath.Join(upper, "vendor/lib"), "now a file\n", 0o644)
	var patch strings.Builder
	if err := Diff(&patch, lower, upper); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"changed.txt": "644 " + strings.Replace(numbered(1, 10), "5\n", "five\n", 1),
		"emptied.txt": "644 ",
		"run.sh":      "755 echo\n",
		"new.txt":     "644 hello\nworld",
		"new-empty":   "644 ",
		"dir/b":       "644 b\n",
		".git/config": "644 [core]\n",

		"Makefile":               "644 all:\n",
		"Makefile x":             "755 x\n",
		"a b":                    "644 spaced\n",
		"sub/.git x":             "644 gitdir: ../evil\n",
		"t\tab\"q\\":             "644 odd\n",
		"caf\u00e9":              "644 accent\n",
		"nested/.git/config":     "644 [core]\n",
		".git/hooks/sample":      "644 s\n",
		"githooks":               "link .git/hooks",
		"vendor/lib/.git/config": "644 [core]\n",
		"vendor/lib/src.c":       "644 int x;\n",
	}
	for _, tool := range [][]string{{"git", "apply", "-"}, {"patch", "-p1", "-s", "-f"}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Fatalf("%s: %v (the test needs it; .ci/run installs it)", tool[0], err)
		}
		dir := t.TempDir()
		if out, err := exec.Command("cp", "-a", lower+"/.", dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		cmd := exec.Command(tool[0], tool[1:]...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(patch.String())
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s\npatch:\n%s", tool, err, out, patch.String())
		}
		got := map[string]string{}
		err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			if e.Type()&os.ModeSymlink != 0 {
				target, err := os.Readlink(path)
				got[rel] = "link " + target
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			got[rel] = fmt.Sprintf("%o %s", fi.Mode().Perm(), b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%v of the patch (-want +got):\n%s\npatch:\n%s", tool, diff, patch.String())
		}
	}
}

// TestDiffHunks checks hunk splitting and merging on line lists.
func TestDiffHunks(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	old := numbered(1, 30)
	cur := strings.Replace(strings.Replace(old, "\n3\n", "\nthree\n", 1), "\n25\n", "\n", 1)
	write(t, filepath.Join(lower, "f"), old, 0o644)
	write(t, filepath.Join(upper, "f"), cur, 0o644)
	want := `diff --git a/f b/f
--- a/f
+++ b/f
@@ -1,6 +1,6 @@
 1
 2
-3
+three
 4
 5
 6
@@ -22,7 +22,6 @@
 22
 23
 24
-25
 26
 27
 28
`
	var got strings.Builder
	if err := Diff(&got, lower, upper); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
}

func BenchmarkDiff(b *testing.B) {
	lower, upper := b.TempDir(), b.TempDir()
	for i := range 50 {
		name := "f" + strconv.Itoa(i)
		os.WriteFile(filepath.Join(lower, name), []byte(numbered(1, 2000)), 0o644)
		os.WriteFile(filepath.Join(upper, name), []byte(strings.Replace(numbered(1, 2000), "\n1000\n", "\nx\n", 1)), 0o644)
	}
	for b.Loop() {
		if err := Diff(&strings.Builder{}, lower, upper); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDiffStaleBetweenWrites: a file the project changed after the
// agent's copy was made but before the agent's last write to it is named
// too: the agent's copy does not hold the project's change either, and
// the patch would undo it (the re-trial: git apply removed the user's
// line). It needs the upper file's birth time.
func TestDiffStaleBetweenWrites(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	u := filepath.Join(upper, "a.txt")
	write(t, u, "HELLO agent-edit-1\n", 0o644) // the copy-up and first write
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, u, 0, unix.STATX_BTIME, &stx); err != nil || stx.Mask&unix.STATX_BTIME == 0 {
		t.Skipf("the file system of %s keeps no birth time", upper)
	}
	write(t, filepath.Join(lower, "a.txt"), "HELLO\nuser line\n", 0o644)
	userAt, agentAt := time.Now().Add(time.Second), time.Now().Add(2*time.Second)
	if err := os.Chtimes(filepath.Join(lower, "a.txt"), userAt, userAt); err != nil {
		t.Fatal(err)
	}
	write(t, u, "HELLO agent-edit-2\n", 0o644) // the agent's last write
	if err := os.Chtimes(u, agentAt, agentAt); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Diff(&b, lower, upper); err != nil {
		t.Fatal(err)
	}
	if want := "Changes to a.txt not shown (" + whyStale + "); the agent's copy is " + u + "\n"; b.String() != want {
		t.Errorf("Diff = %q, want %q", b.String(), want)
	}
}

// TestDiffStale: a file the project changed after the agent's last write
// to it (the lower mtime is later) is named, not patched: the agent's
// copy is older, and its patch would undo the project's change. The same
// for a file the agent deleted. A file changed on both sides with the
// agent's write last, and one the project made equal to the agent's copy
// (the patch applied), diff as before.
func TestDiffStale(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	write(t, filepath.Join(upper, "edited.txt"), "one\nTWO\n", 0o644)
	write(t, filepath.Join(upper, "applied.txt"), "agent\n", 0o644)
	write(t, filepath.Join(upper, "fresh.txt"), "agent's, later\n", 0o644)
	mknodWhiteout(t, filepath.Join(upper, "deleted.txt"))
	write(t, filepath.Join(lower, "edited.txt"), "one\nTWO\nthree by the user\n", 0o644)
	write(t, filepath.Join(lower, "applied.txt"), "agent\n", 0o644)
	write(t, filepath.Join(lower, "deleted.txt"), "changed by the user\n", 0o644)
	write(t, filepath.Join(lower, "fresh.txt"), "user's, earlier\n", 0o644)
	// Before the agent's copy was made (the upper file's birth).
	if earlier := time.Now().Add(-time.Minute); os.Chtimes(filepath.Join(lower, "fresh.txt"), earlier, earlier) != nil {
		t.Fatal("setting fresh.txt's time")
	}
	later := time.Now().Add(time.Second)
	for _, f := range []string{"edited.txt", "applied.txt", "deleted.txt"} {
		if err := os.Chtimes(filepath.Join(lower, f), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(upper, "fresh.txt"), later.Add(time.Second), later.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Diff(&b, lower, upper); err != nil {
		t.Fatal(err)
	}
	why := " not shown (" + whyStale + "); the agent's copy is "
	want := "Changes to deleted.txt" + why + filepath.Join(upper, "deleted.txt") + "\n" +
		"Changes to edited.txt" + why + filepath.Join(upper, "edited.txt") + "\n" +
		"diff --git a/fresh.txt b/fresh.txt\n--- a/fresh.txt\n+++ b/fresh.txt\n@@ -1 +1 @@\n-user's, earlier\n+agent's, later\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
}

// A diff that fails part way still writes the patch of the entries
// before the one that failed, then the error.
func TestDiffErrorKeepsPatchSoFar(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	write(t, filepath.Join(lower, "a.txt"), "old\n", 0o644)
	write(t, filepath.Join(upper, "a.txt"), "new\n", 0o644)
	write(t, filepath.Join(upper, strings.Repeat("z/", maxDepth)+"f"), "deep\n", 0o644)
	var out strings.Builder
	err := Diff(&out, lower, upper)
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("Diff: %v, want ErrLimit", err)
	}
	if !strings.Contains(out.String(), "+new\n") {
		t.Errorf("the patch before the error was not written: %q", out.String())
	}
}
