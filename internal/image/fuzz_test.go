package image

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzUnpackConfined applies two layers of entries chosen by the fuzzer
// from names and link targets built to escape (.., absolute paths to a
// directory outside, links to it, whiteouts and opaque markers) and checks
// that the directory outside never changes, whatever unpack returns.
func FuzzUnpackConfined(f *testing.F) {
	outside := f.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		f.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "d"), 0o700); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"\x02\x00\x10\x00\x01\x21", "\x02\x30\x00\x31\x11\x00\x00\x03\x00\x00", "\x03\x40\x00\x51\x41\x00\x55\x05\x60\x00\x12"} {
		f.Add([]byte(s))
	}
	up := strings.Repeat("../", 12)
	comps := []string{"a", "b", "link", "..", outside[1:], ".wh.a", ".wh..wh..opq", ".wh.link", "d", "secret", ".", ".wh...", "", "abs"}
	targets := []string{outside, up + outside[1:], "/", "a", "a/b", "/a", "..", outside + "/secret", "link", "link/secret", "link/d", "/link/secret"}
	types := []byte{tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink, tar.TypeReg, tar.TypeSymlink}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 96 {
			return
		}
		var layers [][]entry
		var cur []entry
		for i := 0; i+2 < len(data); i += 3 {
			if data[i] == 0xff {
				layers, cur = append(layers, cur), nil
				continue
			}
			n := 1 + int(data[i]>>6)
			var parts []string
			for j := range n {
				parts = append(parts, comps[(int(data[i])>>(j*2)+int(data[i+1])>>(j*2))%len(comps)])
			}
			e := entry{name: strings.Join(parts, "/"), typ: types[int(data[i+1])%len(types)], link: targets[int(data[i+2])%len(targets)], body: "x"}
			if strings.HasPrefix(outside[1:], parts[0]) && data[i+2]&1 == 1 {
				e.name = "/" + e.name
			}
			cur = append(cur, e)
		}
		layers = append(layers, cur)
		for _, es := range layers {
			if _, err := encodeTar(es...); err != nil {
				return // not a tar archive
			}
		}
		before := snapshot(t, outside)
		unpackLayers(t, layers...)
		if diff := cmp.Diff(before, snapshot(t, outside)); diff != "" {
			t.Fatalf("layers %+v changed the outside dir (-before +after):\n%s", layers, diff)
		}
	})
}

// unpackLayers stores the layers as blobs and unpacks them, without a
// registry; it returns the unpack error.
func unpackLayers(t *testing.T, layers ...[]entry) error {
	t.Helper()
	st, err := openStore(context.Background(), filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var descs []descriptor
	for _, es := range layers {
		b := tarBytes(t, es...)
		d := descriptor{Digest: sha256Digest(b), Size: int64(len(b))}
		if err := st.putBlob(strings.NewReader(string(b)), d.Digest, d.Size, 1<<20); err != nil {
			t.Fatal(err)
		}
		descs = append(descs, d)
	}
	p := &puller{store: st, limits: Limits{}.withDefaults()}
	_, err = p.unpack(context.Background(), descs, st.rootPath(sha256Digest([]byte("root"))))
	return err
}
