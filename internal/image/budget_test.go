package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// unpackBlobs is unpackRoot timed: it returns the unpack error and how
// long the unpack took.
func unpackBlobs(t *testing.T, ctx context.Context, limits Limits, blobs ...[]byte) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	_, err := unpackRoot(t, ctx, limits, blobs...)
	return time.Since(start), err
}

// zstdOf is the tar stream write makes, compressed with zstd.
func zstdOf(t *testing.T, write func(w *tar.Writer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	write(tw)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zeros writes an entry of type typ with n zero bytes of data.
func zeros(t *testing.T, tw *tar.Writer, name string, typ byte, n int64) {
	t.Helper()
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Size: n, Mode: 0o644, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	for w := int64(0); w < n; w += int64(len(zero)) {
		if _, err := tw.Write(zero[:min(int64(len(zero)), n-w)]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnpackCountsSkippedEntries: an entry of a type the unpacker skips
// still has its data read by the tar reader, so its size counts against
// the byte limit: a layer of a few KiB that declares 256 MiB of such data
// is refused at its header, not decompressed for minutes (a 1 MiB layer
// held 32 GiB and took the store's lock for as long, whatever the
// limits and the caller's timeout).
func TestUnpackCountsSkippedEntries(t *testing.T) {
	bomb := zstdOf(t, func(tw *tar.Writer) { zeros(t, tw, "bomb", 'Z', 256<<20) })
	took, err := unpackBlobs(t, context.Background(), Limits{Bytes: 1 << 20}, bomb)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "unsupported type") {
		t.Fatalf("unpack of a %d-byte layer declaring 256 MiB of skipped data under a 1 MiB limit: %v (after %s), want ErrLimit", len(bomb), err, took)
	}
	// Within the limit it is skipped with a note, as before.
	small := zstdOf(t, func(tw *tar.Writer) { zeros(t, tw, "odd", 'Z', 1000) })
	if _, err := unpackBlobs(t, context.Background(), Limits{Bytes: 1 << 20}, small); err != nil {
		t.Fatalf("a small entry of an unsupported type: %v", err)
	}
}

// TestUnpackBoundsHeaderChains: the tar reader consumes a chain of GNU
// long-name headers inside one Next, which no entry limit sees; the
// decompressed stream as a whole is bounded by the byte limit and a
// little per entry.
func TestUnpackBoundsHeaderChains(t *testing.T) {
	var raw bytes.Buffer
	for range 8 {
		longName(&raw, 512<<10) // 4 MiB of headers for one entry
	}
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := unpackBlobs(t, context.Background(), Limits{Bytes: 1 << 20, Files: 10}, raw.Bytes())
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "decompress to more than") {
		t.Fatalf("unpack of a chain of 4 MiB of long-name headers under a 1 MiB limit: %v, want ErrLimit", err)
	}
	// The same entry with a short chain unpacks.
	var ok bytes.Buffer
	longName(&ok, 201) // a 200-byte name, over the header's 100
	tw = tar.NewWriter(&ok)
	if err := tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := unpackBlobs(t, context.Background(), Limits{Bytes: 1 << 20, Files: 10}, ok.Bytes()); err != nil {
		t.Fatalf("an entry with one long name: %v", err)
	}
}

// longName writes a GNU long-name header ('L') with n bytes of name,
// which archive/tar's writer does not write by hand.
func longName(w *bytes.Buffer, n int) {
	var h [512]byte
	copy(h[0:], "././@LongLink")
	copy(h[100:], "0000644\x00")
	copy(h[108:], "0000000\x00")
	copy(h[116:], "0000000\x00")
	copy(h[124:], fmt.Sprintf("%011o\x00", n))
	copy(h[136:], "00000000000\x00")
	h[156] = 'L'
	copy(h[257:], "ustar  \x00")
	copy(h[148:], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	w.Write(h[:])
	name := bytes.Repeat([]byte("a"), n)
	name[n-1] = 0
	w.Write(name)
	w.Write(make([]byte, (512-n%512)%512))
}

// TestUnpackEndsWithContext: the unpack stops when its context ends,
// rather than decompressing on while it holds the store's lock.
func TestUnpackEndsWithContext(t *testing.T) {
	big := zstdOf(t, func(tw *tar.Writer) { zeros(t, tw, "big", tar.TypeReg, 64<<20) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := unpackBlobs(t, ctx, Limits{}, big); !errors.Is(err, context.Canceled) {
		t.Fatalf("unpack on an ended context: %v, want context.Canceled", err)
	}
	if _, err := unpackBlobs(t, context.Background(), Limits{}, big); err != nil {
		t.Fatalf("the same layer on a live context: %v", err)
	}
}

// TestOpaqueMarkOnce: a layer that marks one dir opaque many times
// removes the lower layer's entries once and keeps its own; the dir is
// listed once a layer (each mark listed every name of it again, and a
// layer of 70 KB took more than three minutes).
func TestOpaqueMarkOnce(t *testing.T) {
	lower := zstdOf(t, func(tw *tar.Writer) {
		for i := range 300 {
			zeros(t, tw, fmt.Sprintf("d/old%d", i), tar.TypeReg, 0)
		}
	})
	upper := zstdOf(t, func(tw *tar.Writer) {
		zeros(t, tw, "d/new", tar.TypeReg, 0)
		for range 700 {
			if err := tw.WriteHeader(&tar.Header{Name: "d/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
				t.Fatal(err)
			}
		}
	})
	listings := 0
	defer func(orig func(int) ([]string, error)) { listOpaque = orig }(listOpaque)
	listOpaque = func(fd int) ([]string, error) { listings++; return readDirNames(fd) }
	root, err := unpackRoot(t, context.Background(), Limits{}, lower, upper)
	if err != nil {
		t.Fatalf("a layer marking one dir opaque 700 times: %v", err)
	}
	if listings != 1 {
		t.Errorf("the dir was listed %d times for 700 marks in one layer, want once", listings)
	}
	names, err := os.ReadDir(filepath.Join(root, "d"))
	if err != nil || len(names) != 1 || names[0].Name() != "new" {
		t.Errorf("the opaque dir holds %v (%v), want the upper layer's new alone", names, err)
	}
}

// unpackRoot stores each blob as a layer and unpacks them with limits
// on ctx, without a registry; it returns the tree made and the unpack
// error.
func unpackRoot(t *testing.T, ctx context.Context, limits Limits, blobs ...[]byte) (string, error) {
	t.Helper()
	st, err := openStore(context.Background(), filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	var descs []descriptor
	for _, b := range blobs {
		d := descriptor{Digest: sha256Digest(b), Size: int64(len(b))}
		if err := st.putBlob(bytes.NewReader(b), d.Digest, d.Size, int64(len(b))); err != nil {
			t.Fatal(err)
		}
		descs = append(descs, d)
	}
	root := st.rootPath(sha256Digest([]byte("root")))
	_, err = (&puller{store: st, limits: limits.withDefaults()}).unpack(ctx, descs, root)
	return root, err
}
