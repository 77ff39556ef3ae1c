package specconv

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/image"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImagePullRefusesRedirectInside: an image's registry (not trusted)
// that sends its blobs, or its token server, to a name resolving to
// loopback (as an attacker's name could resolve to 169.254.169.254) does
// not get the host to fetch there; the registry's own host and port, a
// loopback address here as in tests, stays reachable.
func TestImagePullRefusesRedirectInside(t *testing.T) {
	var hits atomic.Int64
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(inside.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(inside.URL, "http://"), ":")
	for _, where := range []string{"blob", "token"} {
		t.Run(where, func(t *testing.T) {
			var armed atomic.Bool
			reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case !armed.Load():
				case where == "blob" && strings.Contains(r.URL.Path, "/blobs/"):
					http.Redirect(w, r, "http://localhost:"+port+"/latest/meta-data/", http.StatusTemporaryRedirect)
					return
				case where == "token" && r.URL.Path == "/v2/" && r.Header.Get("Authorization") == "":
					w.Header().Set("WWW-Authenticate", `Bearer realm="http://localhost:`+port+`/token",service="x"`)
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				reg.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			ref := strings.TrimPrefix(srv.URL, "http://") + "/org/app:v1"
			img, err := random.Image(64, 1)
			if err != nil {
				t.Fatal(err)
			}
			nref, err := name.ParseReference(ref, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(nref, img); err != nil {
				t.Fatal(err)
			}
			s := &config.Server{Name: "x", Image: config.ImageSource{Ref: ref, Insecure: true}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			armed.Store(true)
			if _, err := image.Pull(ctx, ref, ImageOptions(s, t.TempDir(), nil)); !errors.Is(err, egress.ErrPrivateAddress) {
				t.Errorf("pull: %v, want %v", err, egress.ErrPrivateAddress)
			}
			armed.Store(false)
			// The registry itself, on loopback, is the config's choice.
			if _, err := image.Pull(ctx, ref, ImageOptions(s, t.TempDir(), nil)); errors.Is(err, egress.ErrPrivateAddress) {
				t.Errorf("pull from the configured loopback registry: %v", err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback service got %d requests", n)
	}
}

// TestImageFetchBoundsResponseWait: the transport serve pulls through
// waits a bounded time for each response of the registry, so a registry
// that accepts the connection and never answers cannot hang a first pull
// for ever.
func TestImageFetchBoundsResponseWait(t *testing.T) {
	opts := ImageOptions(&config.Server{Name: "s", Image: config.ImageSource{Ref: "registry.example.com/a/b:1"}}, t.TempDir(), nil)
	tr, ok := opts.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want an *http.Transport", opts.Transport)
	}
	if tr.ResponseHeaderTimeout != image.ResponseHeaderTimeout || tr.ResponseHeaderTimeout <= 0 {
		t.Errorf("ResponseHeaderTimeout %v; want %v", tr.ResponseHeaderTimeout, image.ResponseHeaderTimeout)
	}
}
