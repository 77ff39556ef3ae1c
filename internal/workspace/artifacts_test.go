//go:build linux

package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

type exportResult struct {
	done    []Exported
	refused []Refused
	err     error
}

// exportBounded runs Export with a deadline, so a FIFO that blocked it
// fails the test instead of hanging it.
func exportBounded(t *testing.T, src, dst string, rules ArtifactRules) ([]Exported, []Refused, error) {
	t.Helper()
	ch := make(chan exportResult, 1)
	go func() {
		d, r, err := Export(src, dst, rules)
		ch <- exportResult{d, r, err}
	}()
	select {
	case res := <-ch:
		return res.done, res.refused, res.err
	case <-time.After(10 * time.Second):
		t.Fatal("Export blocked")
	}
	return nil, nil, nil
}

func TestExport(t *testing.T) {
	src, host := t.TempDir(), t.TempDir()
	dst := filepath.Join(t.TempDir(), "artifacts")
	write(t, filepath.Join(src, "top.txt"), "top\n", 0o755)
	write(t, filepath.Join(src, "out/a.txt"), "a", 0o600)
	write(t, filepath.Join(src, "out/deep/er/b.txt"), "bb", 0o644)
	write(t, filepath.Join(src, "out/c.bin"), "\x00c", 0o644)
	write(t, filepath.Join(src, "out/skip.log"), "not included", 0o644)
	write(t, filepath.Join(src, "big.txt"), strings.Repeat("x", 101), 0o644)
	write(t, filepath.Join(host, "secret"), "host secret", 0o600)
	symlink(t, filepath.Join(host, "secret"), filepath.Join(src, "link.txt"))
	symlink(t, host, filepath.Join(src, "hostdir"))
	write(t, filepath.Join(host, "in-host-dir.txt"), "reachable only via the symlink", 0o644)
	if err := os.Link(filepath.Join(host, "secret"), filepath.Join(src, "hard.txt")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(src, "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	done, refused, err := exportBounded(t, src, dst, ArtifactRules{Include: []string{"**/*.txt", "out/*.bin", "hostdir/**"}, MaxSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantDone := []Exported{
		{"out/a.txt", 1, sum("a")},
		{"out/c.bin", 2, sum("\x00c")},
		{"out/deep/er/b.txt", 2, sum("bb")},
		{"top.txt", 4, sum("top\n")},
	}
	wantRefused := []Refused{
		{"big.txt", ReasonTooLarge},
		{"fifo.txt", ReasonFIFO},
		{"hard.txt", ReasonHardLink},
		{"hostdir", ReasonSymlink},
		{"link.txt", ReasonSymlink},
	}
	if diff := cmp.Diff(wantDone, done); diff != "" {
		t.Errorf("exported (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantRefused, refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	wantTree := map[string]string{
		"out":               "dir 0700",
		"out/a.txt":         `file 0644 "a"`,
		"out/c.bin":         `file 0644 "\x00c"`,
		"out/deep":          "dir 0700",
		"out/deep/er":       "dir 0700",
		"out/deep/er/b.txt": `file 0644 "bb"`,
		"top.txt":           `file 0644 "top\n"`,
	}
	if diff := cmp.Diff(wantTree, state(t, dst)); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("destination dir: %v %v, want mode 0700", fi, err)
	}
}

func TestExportTotalCap(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		write(t, filepath.Join(src, n), strings.Repeat(n, 400), 0o644)
	}
	write(t, filepath.Join(src, "e"), "small", 0o644)
	done, refused, err := exportBounded(t, src, dst, ArtifactRules{MaxTotal: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range done {
		got = append(got, d.Path)
	}
	if diff := cmp.Diff([]string{"a", "b", "e"}, got); diff != "" {
		t.Errorf("exported (-want +got):\n%s", diff)
	}
	want := []Refused{{"c", ReasonTotal}, {"d", ReasonTotal}}
	if diff := cmp.Diff(want, refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
}

func TestExportNeverOverwritesOrFollowsDst(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "a.txt"), "new", 0o644)
	write(t, filepath.Join(src, "sub/x.txt"), "x", 0o644)
	write(t, filepath.Join(src, "esc.txt"), "escape", 0o644)
	write(t, filepath.Join(dst, "a.txt"), "keep", 0o644)
	symlink(t, outside, filepath.Join(dst, "sub"))
	symlink(t, filepath.Join(outside, "esc.txt"), filepath.Join(dst, "esc.txt"))
	done, refused, err := exportBounded(t, src, dst, ArtifactRules{})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Errorf("exported %v", done)
	}
	want := []Refused{{"a.txt", ReasonExists}, {"esc.txt", ReasonExists}, {"sub/x.txt", ReasonBlocked}}
	if diff := cmp.Diff(want, refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a.txt")); string(b) != "keep" {
		t.Errorf("a.txt overwritten: %q", b)
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Errorf("wrote %s through a symlink in dst", names[0].Name())
	}
}

func TestExportBadPattern(t *testing.T) {
	for _, p := range []string{"[", "", "a/[x"} {
		if _, _, err := Export(t.TempDir(), t.TempDir(), ArtifactRules{Include: []string{p}}); !errors.Is(err, ErrPattern) {
			t.Errorf("pattern %q: %v, want ErrPattern", p, err)
		}
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pat, name string
		want      bool
	}{
		{"*.txt", "a.txt", true},
		{"*.txt", "d/a.txt", false},
		{"**/*.txt", "a.txt", true},
		{"**/*.txt", "d/e/a.txt", true},
		{"out/**", "out/a", true},
		{"out/**", "out/a/b", true},
		{"out/**", "outer/a", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"**", "anything/at/all", true},
		{"d/?.go", "d/x.go", true},
		{"d/?.go", "d/xy.go", false},
	}
	for _, tt := range tests {
		if got := matchAny([]string{tt.pat}, tt.name); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pat, tt.name, got, tt.want)
		}
	}
}

func BenchmarkExport(b *testing.B) {
	src := b.TempDir()
	for i := range 100 {
		p := filepath.Join(src, "d", "f"+string(rune('a'+i%26))+string(rune('a'+i/26))+".txt")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(strings.Repeat("artifact\n", 200)), 0o644)
	}
	for b.Loop() {
		if _, _, err := Export(src, filepath.Join(b.TempDir(), "a"), ArtifactRules{Include: []string{"**/*.txt"}}); err != nil {
			b.Fatal(err)
		}
	}
}
