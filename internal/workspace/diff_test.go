//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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

	want := `Files a/big and b/big differ
Binary files a/bin.dat and b/bin.dat differ
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
--- a/gone.txt
+++ b/gone.txt
@@ -1 +0,0 @@
-bye
--- a/gonedir/x
+++ b/gonedir/x
@@ -1 +0,0 @@
-x1
--- a/gonedir/y
+++ b/gonedir/y
@@ -1,2 +0,0 @@
-y1
-y2
Symbolic links a/link -> a and b/link -> b differ
--- a/new.txt
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
\ No newline at end of file
--- a/newdir/f
+++ b/newdir/f
@@ -0,0 +1 @@
+n
--- a/opq/fresh.txt
+++ b/opq/fresh.txt
@@ -0,0 +1 @@
+fresh
--- a/opq/kept.txt
+++ b/opq/kept.txt
@@ -1 +1 @@
-lower kept
+upper kept
--- a/opq/old.txt
+++ b/opq/old.txt
@@ -1 +0,0 @@
-old
Special file b/pipe not compared
--- a/tofile/inner
+++ b/tofile/inner
@@ -1 +0,0 @@
-inner
--- a/tofile
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

// TestDiffHunks checks hunk splitting and merging on line lists.
func TestDiffHunks(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	old := numbered(1, 30)
	cur := strings.Replace(strings.Replace(old, "\n3\n", "\nthree\n", 1), "\n25\n", "\n", 1)
	write(t, filepath.Join(lower, "f"), old, 0o644)
	write(t, filepath.Join(upper, "f"), cur, 0o644)
	want := `--- a/f
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
