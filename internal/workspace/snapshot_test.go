//go:build linux

package workspace

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// snapshotTrees builds an output and an overlay upper tree with every
// kind of entry a snapshot keeps.
func snapshotTrees(t *testing.T) map[string]string {
	t.Helper()
	out, upper := t.TempDir(), t.TempDir()
	write(t, filepath.Join(out, "report.md"), "# done\n", 0o600)
	write(t, filepath.Join(out, "bin/tool"), "\x7fELF", 0o755)
	if err := os.Link(filepath.Join(out, "bin/tool"), filepath.Join(out, "tool-again")); err != nil {
		t.Fatal(err)
	}
	symlink(t, "/etc/passwd", filepath.Join(out, "host-link"))
	if err := os.Chmod(filepath.Join(out, "bin"), 0o750); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(upper, "etc/app.conf"), "x=1\n", 0o644)
	mknodWhiteout(t, filepath.Join(upper, "etc/removed.conf"))
	if err := os.MkdirAll(filepath.Join(upper, "var/cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	setOpaque(t, filepath.Join(upper, "var/cache"))
	write(t, filepath.Join(upper, "var/cache/new"), "fresh", 0o644)
	return map[string]string{"output": out, "overlay": upper}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	parts := snapshotTrees(t)
	meta := Meta{Created: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC), Server: "fs", Agent: "claude", Sandbox: "sbx_AAAAAAAAAAAAAAAA"}
	path := filepath.Join(t.TempDir(), "snap.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Snapshot(f, meta, parts); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := ReadMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	want := meta
	want.Version, want.Parts = 1, []string{"output", "overlay"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadMeta (-want +got):\n%s", diff)
	}
	for name, dir := range parts {
		dst := filepath.Join(t.TempDir(), name)
		if err := Restore(path, name, dst); err != nil {
			t.Fatalf("Restore %s: %v", name, err)
		}
		if diff := cmp.Diff(state(t, dir), state(t, dst)); diff != "" {
			t.Errorf("restored %s (-original +restored):\n%s", name, diff)
		}
	}
	// The hard link stays one file.
	dst := filepath.Join(t.TempDir(), "again")
	if err := Restore(path, "output", dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(filepath.Join(dst, "bin/tool"))
	b, _ := os.Stat(filepath.Join(dst, "tool-again"))
	if !os.SameFile(a, b) {
		t.Error("hard-linked pair restored as two files")
	}
}

func TestSnapshotDeterministic(t *testing.T) {
	parts := snapshotTrees(t)
	meta := Meta{Created: time.Unix(1_700_000_000, 0).UTC()}
	var a, b bytes.Buffer
	if err := Snapshot(&a, meta, parts); err != nil {
		t.Fatal(err)
	}
	if err := Snapshot(&b, meta, parts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two snapshots of the same tree differ")
	}
	write(t, filepath.Join(parts["output"], "report.md"), "# changed\n", 0o600)
	b.Reset()
	if err := Snapshot(&b, meta, parts); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("snapshot did not change with the tree")
	}
}

func TestSnapshotRefusesOutsideHardLink(t *testing.T) {
	out, host := t.TempDir(), t.TempDir()
	write(t, filepath.Join(host, "secret"), "host only", 0o600)
	if err := os.Link(filepath.Join(host, "secret"), filepath.Join(out, "loot")); err != nil {
		t.Fatal(err)
	}
	err := Snapshot(&bytes.Buffer{}, Meta{}, map[string]string{"output": out})
	if !errors.Is(err, ErrHardLink) {
		t.Errorf("Snapshot: %v, want ErrHardLink", err)
	}
}

func TestSnapshotRejectsPartNames(t *testing.T) {
	for _, name := range []string{"", "..", "a/b", MetaName} {
		err := Snapshot(&bytes.Buffer{}, Meta{}, map[string]string{name: t.TempDir()})
		if !errors.Is(err, ErrUnsafeEntry) {
			t.Errorf("part %q: %v, want ErrUnsafeEntry", name, err)
		}
	}
}

func TestRestoreErrors(t *testing.T) {
	dir := t.TempDir()
	metaEntry := func(m Meta) tarEntry {
		b, _ := json.Marshal(m)
		return reg(MetaName, string(b))
	}
	good := Meta{Version: 1, Parts: []string{"output"}}
	tests := []struct {
		name    string
		entries []tarEntry
		part    string
		want    error
	}{
		{"no meta", []tarEntry{reg("output/x", "")}, "output", ErrSnapshot},
		{"future version", []tarEntry{metaEntry(Meta{Version: 2, Parts: []string{"output"}})}, "output", ErrSnapshot},
		{"unknown part", []tarEntry{metaEntry(good)}, "overlay", ErrNoPart},
		{"escape", []tarEntry{metaEntry(good), reg("output/../../x", "evil")}, "output", ErrUnsafeEntry},
		{"device", []tarEntry{metaEntry(good), {tar.Header{Typeflag: tar.TypeChar, Name: "output/null", Devmajor: 1, Devminor: 3}, ""}}, "output", ErrUnsafeEntry},
		{"bad opaque xattr", []tarEntry{metaEntry(good), {tar.Header{Typeflag: tar.TypeDir, Name: "output/d/", PAXRecords: map[string]string{paxOpaque: "security.selinux"}}, ""}}, "output", ErrUnsafeEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := makeTar(t, dir, tt.name+".tar.gz", tt.entries)
			dst, clean := jail(t)
			if err := Restore(path, tt.part, dst); !errors.Is(err, tt.want) {
				t.Errorf("Restore: %v, want %v", err, tt.want)
			}
			if err := clean(); err != nil {
				t.Error(err)
			}
		})
	}
	plain := filepath.Join(dir, "plain")
	write(t, plain, "not gzip", 0o644)
	if _, err := ReadMeta(plain); !errors.Is(err, ErrSnapshot) {
		t.Errorf("ReadMeta of a text file: %v, want ErrSnapshot", err)
	}
}

func BenchmarkSnapshot(b *testing.B) {
	dir := b.TempDir()
	for i := range 200 {
		p := filepath.Join(dir, "d"+string(rune('a'+i%10)), "f"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, bytes.Repeat([]byte("line of text\n"), 100), 0o644)
	}
	parts := map[string]string{"output": dir}
	for b.Loop() {
		if err := Snapshot(&bytes.Buffer{}, Meta{}, parts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRestoreKeepsHoles: a sparse file a sandbox made (256 MiB that take
// a few KiB, within an output size that counts blocks) is restored with
// its holes, not written out in full: the restore of a 1.5 MB snapshot
// wrote 1.6 GB. Its bytes and size come back the same, a trailing hole
// included.
func TestRestoreKeepsHoles(t *testing.T) {
	out := t.TempDir()
	const size = 256 << 20
	f, err := os.Create(filepath.Join(out, "sparse.img"))
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 100 << 20, size - 4096 - (1 << 20)} {
		if _, err := f.WriteAt([]byte("data at the start of a block"), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	write(t, filepath.Join(out, "plain.txt"), "no holes here\n", 0o644)
	path := filepath.Join(t.TempDir(), "snap.tar.gz")
	sf, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Snapshot(sf, Meta{Server: "fs"}, map[string]string{"output": out}); err != nil {
		t.Fatal(err)
	}
	sf.Close()
	dst := filepath.Join(t.TempDir(), "output")
	if err := Restore(path, "output", dst); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "sparse.img"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 4<<20 {
		t.Errorf("restored sparse file: %d bytes taking %d on disk; want %d bytes taking a few blocks", st.Size, st.Blocks*512, size)
	}
	for _, name := range []string{"sparse.img", "plain.txt"} {
		if a, b := fileSum(t, filepath.Join(out, name)), fileSum(t, filepath.Join(dst, name)); a != b {
			t.Errorf("restored %s differs from the original", name)
		}
	}
}

// fileSum is the sha256 of the file at p.
func fileSum(t *testing.T, p string) [sha256.Size]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [sha256.Size]byte(h.Sum(nil))
}
