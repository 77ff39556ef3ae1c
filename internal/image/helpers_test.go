package image

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testRegistry is go-containerregistry's in-process registry on
// loopback; wrap, if set, sees every request first (tampering,
// stalling, auth).
type testRegistry struct {
	host string
	srv  *httptest.Server
}

func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testRegistry{host: strings.TrimPrefix(srv.URL, "http://"), srv: srv}
}

// push writes img (a v1.Image or v1.ImageIndex) as repo:tag and returns
// the full reference.
func (r *testRegistry) push(t *testing.T, repoTag string, img any) string {
	t.Helper()
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	switch v := img.(type) {
	case v1.Image:
		err = remote.Write(ref, v, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	case v1.ImageIndex:
		err = remote.WriteIndex(ref, v, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	if err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return ref.String()
}

// testMtime is the modification time of every test entry.
var testMtime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// entry is one tar entry of a test layer.
type entry struct {
	name string
	typ  byte // tar.TypeReg when zero
	body string
	link string
	mode int64 // 0644 (files) or 0755 (dirs) when zero
}

func file(name, body string) entry      { return entry{name: name, body: body} }
func dir(name string) entry             { return entry{name: name, typ: tar.TypeDir} }
func symlink(name, target string) entry { return entry{name: name, typ: tar.TypeSymlink, link: target} }
func hardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target}
}

func tarBytes(t *testing.T, entries ...entry) []byte {
	t.Helper()
	b, err := encodeTar(entries...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeTar(entries ...entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Format: tar.FormatPAX, ModTime: testMtime}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func layer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	b := tarBytes(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage is an image of the layers for arch, with cfg.
func testImage(t *testing.T, arch string, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", arch, cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func hostImage(t *testing.T, layers ...v1.Layer) v1.Image {
	return testImage(t, runtime.GOARCH, v1.Config{Cmd: []string{"/bin/true"}}, layers...)
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// tree describes every entry below root, one line each: "path type mode
// [content|target]", sorted; links are not followed.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		line := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			dest, _ := os.Readlink(p)
			line += " -> " + dest
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func pullOpts(t *testing.T) Options {
	return Options{Store: filepath.Join(t.TempDir(), "images"), Insecure: true}
}

// storeEmpty fails unless the store holds no root trees and no temp files.
func storeClean(t *testing.T, store string, wantRoots int) {
	t.Helper()
	roots, _ := os.ReadDir(filepath.Join(store, "rootfs"))
	tmp, _ := os.ReadDir(filepath.Join(store, "tmp"))
	if len(roots) != wantRoots || len(tmp) != 0 {
		t.Fatalf("store holds %d roots (want %d) and %d temp files (want 0)", len(roots), wantRoots, len(tmp))
	}
}
