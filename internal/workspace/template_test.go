//go:build linux

package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestSeedFromDir(t *testing.T) {
	tpl := t.TempDir()
	write(t, filepath.Join(tpl, "README"), "hello\n", 0o644)
	write(t, filepath.Join(tpl, "bin/run"), "#!/bin/sh\n", 0o6755) // setuid+setgid dropped
	write(t, filepath.Join(tpl, "ro/f"), "x", 0o400)
	if err := os.Chmod(filepath.Join(tpl, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	symlink(t, "/etc/passwd", filepath.Join(tpl, "passwd"))
	symlink(t, "README", filepath.Join(tpl, "rel"))
	if err := unix.Mkfifo(filepath.Join(tpl, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst, clean := jail(t)
	if err := Seed(dst, tpl); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"README":  `file 0644 "hello\n"`,
		"bin":     "dir 0755",
		"bin/run": `file 0755 "#!/bin/sh\n"`,
		"ro":      "dir 0555",
		"ro/f":    `file 0400 "x"`,
		"passwd":  "link /etc/passwd",
		"rel":     "link README",
	}
	if diff := cmp.Diff(want, state(t, dst)); diff != "" {
		t.Errorf("seeded tree (-want +got):\n%s", diff)
	}
	if err := clean(); err != nil {
		t.Error(err)
	}
	if err := Seed(dst, tpl); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("second Seed into the same dir: %v, want ErrNotEmpty", err)
	}
}

func TestSeedFromTar(t *testing.T) {
	dir := t.TempDir()
	tpl := makeTar(t, dir, "t.tgz", []tarEntry{
		{tar.Header{Typeflag: tar.TypeDir, Name: "./src/", Mode: 0o750}, ""},
		reg("src/main.go", "package main\n"),
		reg("deep/er/file", "implicit parents"),
		{tar.Header{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "../../etc/shadow"}, ""},
		{tar.Header{Typeflag: tar.TypeLink, Name: "src/copy.go", Linkname: "src/main.go"}, ""},
		{tar.Header{Typeflag: tar.TypeReg, Name: "suid", Mode: 0o4755}, ""},
	})
	dst, clean := jail(t)
	if err := Seed(dst, tpl); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"src":          "dir 0750",
		"src/main.go":  `file 0644 "package main\n"`,
		"src/copy.go":  `file 0644 "package main\n"`,
		"deep":         "dir 0755",
		"deep/er":      "dir 0755",
		"deep/er/file": `file 0644 "implicit parents"`,
		"link":         "link ../../etc/shadow",
		"suid":         `file 0755 ""`,
	}
	if diff := cmp.Diff(want, state(t, dst)); diff != "" {
		t.Errorf("seeded tree (-want +got):\n%s", diff)
	}
	if err := clean(); err != nil {
		t.Error(err)
	}
}

func TestSeedHostileTar(t *testing.T) {
	lowLimits(t, limits{entries: 1000, bytes: 1 << 20})
	outside := t.TempDir() // a symlink in the archive points here
	tests := []struct {
		name    string
		entries []tarEntry
		want    error
	}{
		{"dotdot", []tarEntry{reg("../x", "evil")}, ErrUnsafeEntry},
		{"dotdot inside", []tarEntry{reg("a/../../x", "evil")}, ErrUnsafeEntry},
		{"absolute", []tarEntry{reg(filepath.Join(outside, "abs"), "evil")}, ErrUnsafeEntry},
		{"write through symlink", []tarEntry{
			{tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: outside}, ""},
			reg("l/x", "evil"),
		}, ErrUnsafeEntry},
		{"dir through symlink", []tarEntry{
			{tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: outside}, ""},
			{tar.Header{Typeflag: tar.TypeDir, Name: "l/d/", Mode: 0o755}, ""},
		}, ErrUnsafeEntry},
		{"overwrite symlink", []tarEntry{
			{tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: filepath.Join(outside, "f")}, ""},
			reg("l", "evil"),
		}, ErrUnsafeEntry},
		{"hard link to host file", []tarEntry{{tar.Header{Typeflag: tar.TypeLink, Name: "pw", Linkname: "/etc/passwd"}, ""}}, ErrUnsafeEntry},
		{"hard link up", []tarEntry{{tar.Header{Typeflag: tar.TypeLink, Name: "pw", Linkname: "../../../etc/passwd"}, ""}}, ErrUnsafeEntry},
		{"hard link through symlink", []tarEntry{
			{tar.Header{Typeflag: tar.TypeSymlink, Name: "etc", Linkname: "/etc"}, ""},
			{tar.Header{Typeflag: tar.TypeLink, Name: "pw", Linkname: "etc/passwd"}, ""},
		}, ErrUnsafeEntry},
		{"char device", []tarEntry{{tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}, ""}}, ErrUnsafeEntry},
		{"block device", []tarEntry{{tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}, ""}}, ErrUnsafeEntry},
		{"fifo", []tarEntry{{tar.Header{Typeflag: tar.TypeFifo, Name: "p"}, ""}}, ErrUnsafeEntry},
		{"whiteout mark", []tarEntry{{tar.Header{Typeflag: tar.TypeReg, Name: "w", PAXRecords: map[string]string{paxWhiteout: "1"}}, ""}}, ErrUnsafeEntry},
		{"duplicate", []tarEntry{reg("f", "a"), reg("f", "b")}, ErrUnsafeEntry},
		{"entry bomb", manyEntries(10_000), ErrLimit},
		{"too deep", []tarEntry{reg(strings.Repeat("d/", maxDepth)+"f", "")}, ErrLimit},
		{"symlink with empty target", []tarEntry{{tar.Header{Typeflag: tar.TypeSymlink, Name: "e"}, ""}}, ErrUnsafeEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := makeTar(t, t.TempDir(), "t.tar.gz", tt.entries)
			dst, clean := jail(t)
			err := Seed(dst, tpl)
			if !errors.Is(err, tt.want) {
				t.Errorf("Seed: %v, want %v", err, tt.want)
			}
			if err := clean(); err != nil {
				t.Error(err)
			}
			if names, _ := os.ReadDir(outside); len(names) > 0 {
				t.Errorf("wrote %s outside dst", names[0].Name())
			}
		})
	}
}

// TestSeedGzipBomb: a gzip stream that inflates far past the byte limit
// is stopped at the header, before any of it is written.
func TestSeedGzipBomb(t *testing.T) {
	lowLimits(t, limits{entries: 1000, bytes: 1 << 20})
	path := filepath.Join(t.TempDir(), "bomb.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	writeZeroTar(t, f, 16<<20)
	f.Close()
	if fi, _ := os.Stat(path); fi.Size() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed; not a bomb", fi.Size())
	}
	dst, clean := jail(t)
	if err := Seed(dst, path); !errors.Is(err, ErrLimit) {
		t.Errorf("Seed: %v, want ErrLimit", err)
	}
	if got := state(t, dst); len(got) != 0 {
		t.Errorf("bomb wrote %v", got)
	}
	if err := clean(); err != nil {
		t.Error(err)
	}
}

func TestSeedRejectsOtherTemplates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.zip")
	write(t, p, "PK", 0o644)
	dst, _ := jail(t)
	if err := Seed(dst, p); !errors.Is(err, ErrTemplate) {
		t.Errorf("Seed from a zip: %v, want ErrTemplate", err)
	}
}

// TestSeedRefusesLinkedTemplate: a template checked at its server's set-up
// and swapped since for a link (by a sandbox that can write beside it) to
// the home dir is refused, and nothing of what it points to is copied;
// so is one a dir on whose way has become a link.
func TestSeedRefusesLinkedTemplate(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "home")
	write(t, filepath.Join(secret, "id_ed25519"), "SECRET KEY", 0o600)
	tmpl := filepath.Join(dir, "stage", "t")
	if err := os.MkdirAll(filepath.Dir(tmpl), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, tmpl); err != nil {
		t.Fatal(err)
	}
	dst, _ := jail(t)
	if err := Seed(dst, tmpl); !errors.Is(err, ErrTemplate) {
		t.Errorf("Seed from a linked template: %v, want ErrTemplate", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "id_ed25519")); err == nil {
		t.Error("the link's target was copied")
	}
	// A dir on the template's way swapped for a link: .../stage -> a dir
	// whose t (a dir, no link) holds a key.
	other := filepath.Join(dir, "other")
	write(t, filepath.Join(other, "t", "id_ed25519"), "SECRET KEY", 0o600)
	if err := os.Remove(tmpl); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Dir(tmpl)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Dir(tmpl)); err != nil {
		t.Fatal(err)
	}
	dst2, _ := jail(t)
	if err := Seed(dst2, tmpl); !errors.Is(err, ErrTemplate) {
		t.Errorf("Seed from a template behind a linked dir: %v, want ErrTemplate", err)
	}
	if _, err := os.Stat(filepath.Join(dst2, "id_ed25519")); err == nil {
		t.Error("the linked dir's template was copied")
	}
}

func FuzzSeedTar(f *testing.F) {
	f.Add(makeTarBytes(f, []tarEntry{reg("a", "b")}, false))
	f.Add(makeTarBytes(f, []tarEntry{reg("../x", "b")}, false))
	f.Add(makeTarBytes(f, []tarEntry{
		{tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: ".."}, ""},
		reg("l/x", "evil"),
		{tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "l/x"}, ""},
		{tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o000}, ""},
		reg("d/e", "in a 000 dir"),
	}, false))
	lowLimits(f, limits{entries: 200, bytes: 1 << 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.tar")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		dst, clean := jail(t)
		Seed(dst, path) // errors are fine; escapes and panics are not
		if err := clean(); err != nil {
			t.Fatal(err)
		}
		for rel, what := range state(t, dst) {
			if !strings.HasPrefix(what, "dir") && !strings.HasPrefix(what, "file") && !strings.HasPrefix(what, "link") {
				t.Errorf("%s is %s", rel, what)
			}
		}
		// Let t.TempDir clean up a 000 dir.
		filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				os.Chmod(p, 0o700)
			}
			return nil
		})
	})
}

func manyEntries(n int) []tarEntry {
	out := make([]tarEntry, n)
	for i := range out {
		out[i] = reg("f"+strconv.Itoa(i), "")
	}
	return out
}

func lowLimits(t testing.TB, l limits) {
	saved := templateLimits
	templateLimits = l
	t.Cleanup(func() { templateLimits = saved })
}

// writeZeroTar writes a gzip tar of one file of n zero bytes.
func writeZeroTar(t *testing.T, w io.Writer, n int64) {
	t.Helper()
	zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zeros", Mode: 0o644, Size: n}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(tw, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// BenchmarkSeed is what a template adds to the start of a new workspace's
// sandbox (200 files, 260 KiB): from a dir, and from a .tar.gz snapshot.
// Compare with internal/sandbox's BenchmarkRunSandbox, the start itself.
func BenchmarkSeed(b *testing.B) {
	tmpl := b.TempDir()
	for i := range 200 {
		p := filepath.Join(tmpl, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%03d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, bytes.Repeat([]byte("line of text\n"), 100), 0o644)
	}
	snap := filepath.Join(b.TempDir(), "snap.tar.gz")
	f, err := os.Create(snap)
	if err != nil {
		b.Fatal(err)
	}
	if err := Snapshot(f, Meta{Version: SnapshotVersion, Parts: []string{"output"}}, map[string]string{"output": tmpl}); err != nil {
		b.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		name string
		seed func(dst string) error
	}{
		{"from=dir", func(dst string) error { return Seed(dst, tmpl) }},
		{"from=snapshot", func(dst string) error { return Restore(snap, "output", dst) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			root := b.TempDir()
			n := 0
			for b.Loop() {
				n++
				dst := filepath.Join(root, fmt.Sprint(n))
				if err := os.Mkdir(dst, 0o700); err != nil {
					b.Fatal(err)
				}
				if err := tc.seed(dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
