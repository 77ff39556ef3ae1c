package image

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestPullUnpacksLayersInOrder(t *testing.T) {
	var blobGets atomic.Int32
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
				blobGets.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	base := layer(t,
		dir("usr/"), dir("usr/bin/"), file("usr/bin/tool", "v1"), symlink("bin", "usr/bin"),
		hardlink("usr/bin/tool-link", "usr/bin/tool"),
		entry{name: "usr/bin/suid", body: "s", mode: 0o4755},
		entry{name: "dev/null", typ: tar.TypeChar}, entry{name: "run/fifo", typ: tar.TypeFifo},
		dir("etc/"), file("etc/gone", "old"), dir("opq/"), file("opq/lower", "lower"),
		file("replaced", "file"), entry{name: "locked/", typ: tar.TypeDir, mode: 0o500},
		file("locked/inside", "in"),
	)
	upper := layer(t,
		file("etc/.wh.gone", ""), dir("opq/"), file("opq/upper", "upper"), file("opq/.wh..wh..opq", ""),
		dir("replaced/"), file("replaced/now-a-dir", "d"), file("usr/bin/tool", "v2"),
		file("locked/later", "written into a 0500 dir"),
	)
	img := testImage(t, runtime.GOARCH, v1.Config{
		Entrypoint: []string{"/usr/bin/tool"}, Cmd: []string{"serve"}, Env: []string{"A=1"},
		WorkingDir: "/srv", User: "1000:1000",
	}, base, upper)
	ref := reg.push(t, "org/app:v1", img)
	opts := pullOpts(t)
	var progress []string
	opts.Progress = func(msg string) { progress = append(progress, msg) }
	got, err := Pull(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(progress) != 3 || !strings.HasPrefix(progress[0], "fetching layer 1/2") || !strings.HasPrefix(progress[2], "unpacking") {
		t.Errorf("progress %q, want two layers fetched, then unpacking", progress)
	}
	if got.Digest != digestOf(t, img) || got.IndexDigest != "" {
		t.Errorf("digest %s (index %q), want %s", got.Digest, got.IndexDigest, digestOf(t, img))
	}
	wantCfg := Config{Entrypoint: []string{"/usr/bin/tool"}, Cmd: []string{"serve"}, Env: []string{"A=1"}, WorkingDir: "/srv", User: "1000:1000"}
	if diff := cmp.Diff(wantCfg, got.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if argv := got.Config.Argv(nil); !cmp.Equal(argv, []string{"/usr/bin/tool", "serve"}) {
		t.Errorf("Argv(nil) = %q", argv)
	}
	if argv := got.Config.Argv([]string{"x"}); !cmp.Equal(argv, []string{"/usr/bin/tool", "x"}) {
		t.Errorf("Argv(x) = %q", argv)
	}
	want := []string{
		"bin Lrwxrwxrwx -> usr/bin",
		"etc drwxr-xr-x",
		"locked drwx------", // 0500 plus the owner's write bit, so later layers could write
		"locked/inside -rw-r--r-- in",
		"locked/later -rw-r--r-- written into a 0500 dir",
		"opq drwxr-xr-x",
		"opq/upper -rw-r--r-- upper",
		"replaced drwxr-xr-x",
		"replaced/now-a-dir -rw-r--r-- d",
		"usr drwxr-xr-x",
		"usr/bin drwxr-xr-x",
		"usr/bin/suid -rwxr-xr-x s",
		"usr/bin/tool -rw-r--r-- v2",
		"usr/bin/tool-link -rw-r--r-- v1",
	}
	if diff := cmp.Diff(want, tree(t, got.Root)); diff != "" {
		t.Errorf("root tree (-want +got):\n%s", diff)
	}
	for _, n := range []string{"usr/bin/tool", "bin"} {
		if fi, err := os.Lstat(filepath.Join(got.Root, n)); err != nil || !fi.ModTime().Equal(testMtime) {
			t.Errorf("/%s: mtime %v, %v; want the layer's %v", n, fi.ModTime(), err, testMtime)
		}
	}
	for _, n := range []string{"skipped /dev/null", "skipped /run/fifo", "setuid/setgid bits of /usr/bin/suid"} {
		if !strings.Contains(strings.Join(got.Notes, "\n"), n) {
			t.Errorf("notes %q lack %q", got.Notes, n)
		}
	}
	storeClean(t, opts.Store, 1)

	// Again by tag: the manifest comes from the registry, nothing else.
	gets := blobGets.Load()
	again, err := Pull(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Root != got.Root || blobGets.Load() != gets || len(progress) != 3 {
		t.Errorf("second pull: root %s (first %s), %d more blob fetches", again.Root, got.Root, blobGets.Load()-gets)
	}
	// By digest with the registry gone: the store alone answers.
	reg.srv.Close()
	byDigest := reg.host + "/org/app@" + got.Digest
	off, err := Pull(context.Background(), byDigest, opts)
	if err != nil {
		t.Fatalf("offline pull by digest: %v", err)
	}
	if off.Root != got.Root || !cmp.Equal(off.Config, got.Config) {
		t.Errorf("offline pull: %+v, want root %s", off, got.Root)
	}
}

func TestPullMultiArchIndex(t *testing.T) {
	reg := startRegistry(t, nil)
	other := "s390x"
	if runtime.GOARCH == other {
		other = "arm64"
	}
	host := testImage(t, runtime.GOARCH, v1.Config{}, layer(t, file("arch", runtime.GOARCH)))
	foreign := testImage(t, other, v1.Config{}, layer(t, file("arch", other)))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: foreign, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}},
		mutate.IndexAddendum{Add: host, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	ref := reg.push(t, "org/multi:v1", idx)
	opts := pullOpts(t)
	img, err := Pull(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	idxDigest, _ := idx.Digest()
	if img.Digest != digestOf(t, host) || img.IndexDigest != idxDigest.String() {
		t.Errorf("digest %s index %s, want %s index %s", img.Digest, img.IndexDigest, digestOf(t, host), idxDigest)
	}
	if b, err := os.ReadFile(filepath.Join(img.Root, "arch")); err != nil || string(b) != runtime.GOARCH {
		t.Errorf("/arch = %q, %v; want %s", b, err, runtime.GOARCH)
	}
	// The other one on request.
	opts.Platform = "linux/" + other
	img, err = Pull(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(img.Root, "arch")); string(b) != other {
		t.Errorf("/arch of linux/%s = %q", other, b)
	}
	// A platform the index lacks.
	opts.Platform = "linux/riscv64"
	_, err = Pull(context.Background(), ref, opts)
	if !errors.Is(err, ErrNoPlatform) || !strings.Contains(err.Error(), "linux/riscv64") || !strings.Contains(err.Error(), "linux/"+other) || !strings.Contains(err.Error(), "image_platform") {
		t.Errorf("missing platform: %v, want ErrNoPlatform naming the wanted and the present platforms, and image_platform", err)
	}
	// A single-platform image of another architecture.
	ref = reg.push(t, "org/foreign:v1", foreign)
	opts.Platform = ""
	if _, err := Pull(context.Background(), ref, opts); !errors.Is(err, ErrNoPlatform) || !strings.Contains(err.Error(), "image_platform") {
		t.Errorf("foreign image: %v, want ErrNoPlatform naming image_platform", err)
	}
}

func TestPullMissingTag(t *testing.T) {
	reg := startRegistry(t, nil)
	reg.push(t, "org/app:v1", hostImage(t, layer(t, file("a", "a"))))
	opts := pullOpts(t)
	for _, ref := range []string{reg.host + "/org/app:v2", reg.host + "/org/nothing:v1",
		reg.host + "/org/app@sha256:" + strings.Repeat("ab", 32)} {
		_, err := Pull(context.Background(), ref, opts)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), strings.TrimPrefix(ref, reg.host+"/")) {
			t.Errorf("Pull(%s): %v, want ErrNotFound naming the image", ref, err)
		}
	}
	storeClean(t, opts.Store, 0)
}

// tamper serves other bytes of the same length for path suffix.
func tamper(suffix string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, suffix) {
				h.ServeHTTP(w, r)
				return
			}
			rec := &recorder{header: http.Header{}}
			h.ServeHTTP(rec, r)
			b := []byte(rec.body.String())
			if len(b) > 0 {
				b[len(b)/2] ^= 0xff
			}
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.code)
			w.Write(b)
		})
	}
}

type recorder struct {
	header http.Header
	body   strings.Builder
	code   int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(c int)           { r.code = c }

func TestPullRefusesTamperedBlobs(t *testing.T) {
	img := hostImage(t, layer(t, file("a", "a")), layer(t, file("b", strings.Repeat("b", 4096))))
	layers, _ := img.Layers()
	second, _ := layers[1].Digest()
	cfgDigest, _ := img.ConfigName()
	mfDigest := digestOf(t, img)
	for _, tc := range []struct{ name, suffix, ref string }{
		{"layer", "/blobs/" + second.String(), "org/app:v1"},
		{"config", "/blobs/" + cfgDigest.String(), "org/app:v1"},
		{"manifest by digest", "/manifests/" + mfDigest, "org/app@" + mfDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := startRegistry(t, tamper(tc.suffix))
			reg.push(t, "org/app:v1", img)
			opts := pullOpts(t)
			_, err := Pull(context.Background(), reg.host+"/"+tc.ref, opts)
			if !errors.Is(err, ErrDigest) {
				t.Fatalf("Pull: %v, want ErrDigest", err)
			}
			storeClean(t, opts.Store, 0)
			bad := strings.TrimPrefix(tc.suffix[strings.LastIndex(tc.suffix, "/")+1:], "sha256:")
			if _, err := os.Stat(filepath.Join(opts.Store, "blobs/sha256", bad)); err == nil {
				t.Errorf("the tampered blob is in the store")
			}
		})
	}
}

// A blob damaged in the store after it was checked is caught when the
// tree is built, and fetched afresh by the next pull.
func TestPullRechecksStoredBlobs(t *testing.T) {
	reg := startRegistry(t, nil)
	img := hostImage(t, layer(t, file("a", "original")))
	ref := reg.push(t, "org/app:v1", img)
	opts := pullOpts(t)
	got, err := Pull(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeTree(got.Root); err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	blob := filepath.Join(opts.Store, "blobs/sha256", d.Hex)
	if err := os.WriteFile(blob, tarBytes(t, file("a", "evil")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Pull(context.Background(), ref, opts); !errors.Is(err, ErrDigest) {
		t.Fatalf("pull over a damaged blob: %v, want ErrDigest", err)
	}
	storeClean(t, opts.Store, 0)
	got, err = Pull(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(got.Root, "a")); string(b) != "original" {
		t.Fatalf("/a = %q after refetch", b)
	}
}

func TestPullInterruptedLeavesNothing(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	img := hostImage(t, layer(t, file("small", "s")), layer(t, file("big", big)))
	layers, _ := img.Layers()
	bigDigest, _ := layers[1].Digest()
	stall := make(chan struct{})
	var stalled atomic.Bool
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if stalled.Load() || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, bigDigest.String()) {
				h.ServeHTTP(w, r)
				return
			}
			rec := &recorder{header: http.Header{}}
			h.ServeHTTP(rec, r)
			w.Header().Set("Content-Length", fmt.Sprint(rec.body.Len()))
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(rec.body.String()[:rec.body.Len()/2]))
			w.(http.Flusher).Flush()
			close(stall)
			<-r.Context().Done()
		})
	})
	ref := reg.push(t, "org/app:v1", img)
	opts := pullOpts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-stall:
			time.Sleep(50 * time.Millisecond)
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := Pull(ctx, ref, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pull: %v, want context.Canceled", err)
	}
	storeClean(t, opts.Store, 0)
	if _, err := os.Stat(filepath.Join(opts.Store, "blobs/sha256", bigDigest.Hex)); err == nil {
		t.Fatal("the half-fetched blob is in the store")
	}
	// A pull that died harder leaves temp files: the next pull removes them.
	for _, p := range []string{"tmp/blob-123", "tmp/rootfs-456/usr/bin/x"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(opts.Store, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(opts.Store, p), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(opts.Store, "tmp/rootfs-456/usr"), 0o500); err != nil {
		t.Fatal(err)
	}
	stalled.Store(true)
	got, err := Pull(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(got.Root, "big")); string(b) != big {
		t.Fatalf("/big has %d bytes, want %d", len(b), len(big))
	}
	storeClean(t, opts.Store, 1)
}

func TestPullRefusesPlainHTTP(t *testing.T) {
	reg := startRegistry(t, nil)
	ref := reg.push(t, "org/app:v1", hostImage(t, layer(t, file("a", "a"))))
	opts := pullOpts(t)
	opts.Insecure = false
	if _, err := Pull(context.Background(), ref, opts); !errors.Is(err, ErrInsecure) {
		t.Errorf("plain HTTP to loopback without Insecure: %v, want ErrInsecure", err)
	}
	opts.Insecure = true
	for _, r := range []string{"registry.example.com/org/app:v1", "10.0.0.5:5000/org/app:v1", "192.168.1.2/x:1"} {
		if _, err := Pull(context.Background(), r, opts); !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Insecure pull of %s: %v, want ErrInsecure", r, err)
		}
	}
	// A private address without Insecure: go-containerregistry would fall
	// back to HTTP there; the guard does not let it.
	g := schemeGuard{base: http.DefaultTransport}
	req, _ := http.NewRequest(http.MethodGet, "http://10.0.0.5:5000/v2/", nil)
	if _, err := g.RoundTrip(req); !errors.Is(err, ErrInsecure) {
		t.Errorf("guard let plain HTTP to 10.0.0.5 through: %v", err)
	}
}

func TestPullUsesDockerConfigCredentials(t *testing.T) {
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"auth"}]}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	cfgDir := t.TempDir()
	writeAuth := func(user, pass string) {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, auth)
		if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DOCKER_CONFIG", cfgDir)
	writeAuth("alice", "s3cret")
	ref := reg.push(t, "org/private:v1", hostImage(t, layer(t, file("secret-app", "x"))))
	opts := pullOpts(t)
	if _, err := Pull(context.Background(), ref, opts); err != nil {
		t.Fatalf("pull with credentials: %v", err)
	}
	writeAuth("alice", "wrong")
	opts = pullOpts(t)
	_, err := Pull(context.Background(), ref, opts)
	if err == nil || !strings.Contains(err.Error(), "refused access") {
		t.Fatalf("pull with wrong credentials: %v, want a refusal", err)
	}
}

func TestParseRef(t *testing.T) {
	d := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		in   string
		want Ref
		err  bool
	}{
		{in: "alpine", want: Ref{Registry: "index.docker.io", Repository: "library/alpine", Tag: "latest"}},
		{in: "ghcr.io/github/github-mcp-server:v1.2", want: Ref{Registry: "ghcr.io", Repository: "github/github-mcp-server", Tag: "v1.2"}},
		{in: "127.0.0.1:5000/o/s@" + d, want: Ref{Registry: "127.0.0.1:5000", Repository: "o/s", Digest: d}},
		{in: "ghcr.io/o/s:v1@" + d, want: Ref{Registry: "ghcr.io", Repository: "o/s", Tag: "v1", Digest: d}},
		{in: "", err: true},
		{in: "Upper/Case:v1", err: true},
		{in: "o/s@sha256:short", err: true},
		{in: "o/s@md5:" + strings.Repeat("0", 32), err: true},
		{in: "o/s:v1 --rm", err: true},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("ParseRef(%q) error %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if !tt.err && got != tt.want {
			t.Errorf("ParseRef(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	if !(Ref{Registry: "localhost:5000"}).Loopback() || !(Ref{Registry: "[::1]:80"}).Loopback() || (Ref{Registry: "10.0.0.1:80"}).Loopback() {
		t.Error("Loopback misjudges")
	}
}
