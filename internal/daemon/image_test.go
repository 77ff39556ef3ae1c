package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"mcpbox/internal/config"
	"mcpbox/internal/image"
	"mcpbox/internal/integrity"
)

// pushRandom pushes a random one-layer image of the host's platform as
// ref and returns its digest.
func pushRandom(t *testing.T, ref string) string {
	t.Helper()
	img := hostImage(t)
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d.String()
}

// imageRig starts a loopback registry (host) and an image set-up over a
// fresh state dir, whose messages go to stderr.
func imageRig(t *testing.T) (srv *httptest.Server, host string, is imageSetup, stderr *bytes.Buffer) {
	t.Helper()
	srv = httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	stderr = &bytes.Buffer{}
	is = imageSetup{stateDir: dir, lockPath: filepath.Join(dir, "mcpbox.lock"), stderr: stderr}
	return srv, strings.TrimPrefix(srv.URL, "http://"), is, stderr
}

func digestIs(img *image.Image, want string) error {
	if img == nil || img.Digest != want {
		return fmt.Errorf("image %+v, want digest %s", img, want)
	}
	return nil
}

// TestPinnedImage: the first start pulls and pins; later starts run the
// pin; a moved tag is refused naming both digests; another reference in
// the config is pinned anew; with the registry gone the pinned image runs
// from the store, with a note, and so it does with a registry that only
// answers in plain HTTP or does not answer at all.
func TestPinnedImage(t *testing.T) {
	srv, host, is, stderr := imageRig(t)
	s := &config.Server{Name: "img", Image: config.ImageSource{Ref: host + "/t/app:v1", Insecure: true}}
	ctx := context.Background()
	pinned := func() integrity.ImagePin {
		l, err := integrity.ReadLock(is.lockPath)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := l.Image("img")
		return p
	}

	first := pushRandom(t, s.Image.Ref)
	check := is
	check.noRecord = true // pin --check
	if img, err := check.pinnedImage(ctx, s); err != nil || img.Digest != first || pinned() != (integrity.ImagePin{}) {
		t.Fatalf("pin --check: %v, %+v, lock %+v", err, img, pinned())
	}
	stderr.Reset()
	img, err := is.pinnedImage(ctx, s)
	if err != nil || img.Digest != first || pinned().Digest != first || !strings.Contains(stderr.String(), "pinned image "+s.Image.Ref) {
		t.Fatalf("first start: %v, %+v, lock %+v\n%s", err, img, pinned(), stderr.String())
	}
	stderr.Reset()
	if img, err = is.pinnedImage(ctx, s); err != nil || img.Digest != first || stderr.Len() != 0 {
		t.Fatalf("second start: %v, %+v\n%s", err, img, stderr.String())
	}

	second := pushRandom(t, s.Image.Ref)
	_, err = is.pinnedImage(ctx, s)
	var ce *ImageChangedError
	if !errors.As(err, &ce) || ce.Pinned != first || ce.Now != second || !strings.HasPrefix(err.Error(), "server img: image "+s.Image.Ref) {
		t.Fatalf("moved tag: %v, want an ImageChangedError from %s to %s", err, first, second)
	}
	if pinned().Digest != first {
		t.Fatalf("a refused start changed the pin")
	}

	other := &config.Server{Name: "img", Image: config.ImageSource{Ref: host + "/t/app:v2", Insecure: true}}
	v2 := pushRandom(t, other.Image.Ref)
	if img, err = is.pinnedImage(ctx, other); err != nil || img.Digest != v2 || pinned().Ref != other.Image.Ref {
		t.Fatalf("a new reference in the config: %v, %+v, lock %+v", err, img, pinned())
	}
	if _, err = is.pinnedImage(ctx, s); err != nil || pinned().Digest != second {
		t.Fatalf("back to v1, pinned anew at what it points to now: %v, lock %+v", err, pinned())
	}

	// Only plain HTTP, which a server without image_insecure refuses: the
	// pin runs, as with a registry that cannot be asked.
	plain := *s
	plain.Image.Insecure = false
	stderr.Reset()
	if img, err = is.pinnedImage(ctx, &plain); err != nil || img.Digest != second || !strings.Contains(stderr.String(), "image_insecure: true") {
		t.Fatalf("registry in plain HTTP only: %v, %+v\n%s", err, img, stderr.String())
	}

	srv.Close()
	stderr.Reset()
	if img, err = is.pinnedImage(ctx, s); err != nil || img.Digest != second || !strings.Contains(stderr.String(), "cannot ask the registry") {
		t.Fatalf("registry gone: %v, %+v\n%s", err, img, stderr.String())
	}

	missing := &config.Server{Name: "nope", Image: config.ImageSource{Ref: host + "/t/none:v1", Insecure: true}}
	if _, err = is.pinnedImage(ctx, missing); err == nil || !strings.HasPrefix(err.Error(), "server nope: ") {
		t.Fatalf("an image that cannot be pulled: %v, want an error naming the server", err)
	}

	// A registry that accepts connections and never answers: asking it
	// gives up after askTimeout, and the pin runs.
	ln, err := net.Listen("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	hung := is
	hung.askTimeout = 300 * time.Millisecond
	stderr.Reset()
	done := make(chan error, 1)
	go func() { img, err := hung.pinnedImage(ctx, s); done <- errors.Join(err, digestIs(img, second)) }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stderr.String(), "cannot ask the registry") {
			t.Fatalf("hung registry: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a hung registry held the start for 30 s")
	}
}

// pushIndex pushes, as ref, a multi-arch index of host (an image of the
// host's platform) and a random image for linux/other, and returns the
// index's digest and host's.
func pushIndex(t *testing.T, ref string, host v1.Image) (string, string) {
	t.Helper()
	other, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: host, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "other"}}})
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	h, _ := host.Digest()
	return d.String(), h.String()
}

// hostImage is a random one-layer image of the host's platform.
func hostImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestPinnedIndexRepublished: a multi-arch index published again with
// only another platform's image changed still runs the pinned image of
// this platform, with a note; one whose image for this platform changed
// is refused.
func TestPinnedIndexRepublished(t *testing.T) {
	_, host, is, stderr := imageRig(t)
	s := &config.Server{Name: "img", Image: config.ImageSource{Ref: host + "/t/multi:v1", Insecure: true}}
	ctx := context.Background()

	mine := hostImage(t)
	_, want := pushIndex(t, s.Image.Ref, mine)
	if img, err := is.pinnedImage(ctx, s); err != nil || img.Digest != want {
		t.Fatalf("first start: %v, %+v", err, img)
	}
	idx2, _ := pushIndex(t, s.Image.Ref, mine) // the other platform's image is new
	stderr.Reset()
	if img, err := is.pinnedImage(ctx, s); err != nil || img.Digest != want || !strings.Contains(stderr.String(), idx2) || !strings.Contains(stderr.String(), "is the pinned "+want) {
		t.Fatalf("index republished, this platform's image unchanged: %v, %+v\n%s", err, img, stderr.String())
	}
	pushIndex(t, s.Image.Ref, hostImage(t))
	var ce *ImageChangedError
	if _, err := is.pinnedImage(ctx, s); !errors.As(err, &ce) {
		t.Fatalf("this platform's image changed: %v, want an ImageChangedError", err)
	}
}
