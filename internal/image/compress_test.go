package image

import (
	"bytes"
	"context"
	"io"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestPullLayerCompressions(t *testing.T) {
	reg := startRegistry(t, nil)
	zb := tarBytes(t, file("z", "zstd"))
	zl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(zb)), nil },
		tarball.WithCompression(compression.ZStd), tarball.WithMediaType(types.OCILayerZStd))
	if err != nil {
		t.Fatal(err)
	}
	plain := static.NewLayer(tarBytes(t, file("p", "plain")), types.OCIUncompressedLayer)
	ref := reg.push(t, "org/comp:v1", hostImage(t, layer(t, file("g", "gzip")), zl, plain))
	img, err := Pull(context.Background(), ref, pullOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"g -rw-r--r-- gzip", "p -rw-r--r-- plain", "z -rw-r--r-- zstd"}
	if diff := cmp.Diff(want, tree(t, img.Root)); diff != "" {
		t.Fatalf("tree (-want +got):\n%s", diff)
	}

	foreign := static.NewLayer(tarBytes(t, file("f", "f")), types.DockerForeignLayer)
	ref = reg.push(t, "org/foreign-layer:v1", hostImage(t, foreign))
	if _, err := Pull(context.Background(), ref, pullOpts(t)); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("foreign layer: %v, want a refusal", err)
	}
}

// FuzzCleanName checks cleanName against a slow reference: refused
// exactly when a component is "..", otherwise a clean relative path that
// stays below the root.
func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"a/b", "/abs", "../x", "a/../b", "./", ".", "", "a//b/", "..a/b..", "a/..", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := cleanName(name)
		dotdot := strings.ContainsRune(name, 0)
		for _, c := range strings.Split(name, "/") {
			dotdot = dotdot || c == ".."
		}
		if dotdot != (err != nil) {
			t.Fatalf("cleanName(%q) = %q, %v; want refusal %v", name, got, err, dotdot)
		}
		if err != nil {
			return
		}
		if got != "." && (strings.HasPrefix(got, "/") || path.Clean(got) != got || strings.HasPrefix(got, "../") || got == "..") {
			t.Fatalf("cleanName(%q) = %q: not clean and relative", name, got)
		}
	})
}
