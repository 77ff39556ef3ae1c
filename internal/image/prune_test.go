package image

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestPruneKeepsWhatPinnedImagesUse(t *testing.T) {
	reg := startRegistry(t, nil)
	shared := layer(t, file("shared", "s"))
	a := hostImage(t, shared, layer(t, file("a", "a")))
	b := hostImage(t, shared, layer(t, file("b", "b")))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: a, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}})
	opts := pullOpts(t)
	ia, err := Pull(context.Background(), reg.push(t, "org/a:v1", idx), opts)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := Pull(context.Background(), reg.push(t, "org/b:v1", b), opts)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := Prune(context.Background(), opts.Store, []string{ia.IndexDigest})
	if err != nil {
		t.Fatal(err)
	}
	// b's root, manifest, config and own layer go; the shared layer stays.
	if removed != 4 {
		t.Errorf("removed %d, want 4", removed)
	}
	if _, err := os.Stat(ib.Root); err == nil {
		t.Error("the unpinned image's root survived")
	}
	reg.srv.Close()
	again, err := Pull(context.Background(), reg.host+"/org/a@"+ia.IndexDigest, opts)
	if err != nil {
		t.Fatalf("offline pull of the kept image: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(again.Root, "shared")); string(b) != "s" {
		t.Errorf("kept root lost /shared")
	}
	if n, err := Prune(context.Background(), opts.Store, nil); err != nil || n != 6 {
		t.Errorf("pruning everything: %d, %v; want 6 removed (index, manifest, config, two layers, root)", n, err)
	}
}
