package image

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestResolve: a tag resolves to what it points to now (an image or an
// index) without fetching any layer; a re-tag is seen; a digest resolves
// without a request; a missing tag is ErrNotFound.
func TestResolve(t *testing.T) {
	var blobs atomic.Int32
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
				blobs.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	one := hostImage(t, layer(t, file("a", "1")))
	ref := reg.push(t, "org/app:v1", one)
	opts := pullOpts(t)
	got, err := Resolve(context.Background(), ref, opts)
	if err != nil || got != digestOf(t, one) {
		t.Fatalf("Resolve = %s, %v; want %s", got, err, digestOf(t, one))
	}
	two := hostImage(t, layer(t, file("a", "2")))
	reg.push(t, "org/app:v1", two)
	if got, err = Resolve(context.Background(), ref, opts); err != nil || got != digestOf(t, two) {
		t.Fatalf("after re-tag: %s, %v; want %s", got, err, digestOf(t, two))
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: one,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}})
	iref := reg.push(t, "org/multi:v1", idx)
	id, _ := idx.Digest()
	if got, err = Resolve(context.Background(), iref, opts); err != nil || got != id.String() {
		t.Fatalf("index: %s, %v; want %s", got, err, id)
	}
	if n := blobs.Load(); n != 0 {
		t.Errorf("Resolve fetched %d blobs, want none", n)
	}
	byDigest := reg.host + "/org/gone@" + digestOf(t, one)
	reg.srv.Close()
	if got, err = Resolve(context.Background(), byDigest, opts); err != nil || got != digestOf(t, one) {
		t.Fatalf("by digest with the registry gone: %s, %v", got, err)
	}
	if _, err = Resolve(context.Background(), ref, opts); err == nil {
		t.Fatal("Resolve with the registry gone succeeded")
	}
}

func TestResolveMissingTag(t *testing.T) {
	reg := startRegistry(t, nil)
	reg.push(t, "org/app:v1", hostImage(t, layer(t, file("a", "a"))))
	_, err := Resolve(context.Background(), reg.host+"/org/app:v2", pullOpts(t))
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve of a missing tag: %v, want ErrNotFound", err)
	}
}
