package pkginstall

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testPkg is one version of a package the loopback registry serves.
type testPkg struct {
	name, version string
	files         map[string]string // path inside package/: content
	// integrity, if set, is what the metadata claims instead of the
	// tarball's real hash (a registry serving other bytes).
	integrity string
	// tarball, if set, is the package's archive as it is (packed from a
	// real package's directory); files then holds its package.json only.
	tarball []byte
}

// tgz builds the package's tarball as npm pack would: package/... files.
func (p testPkg) tgz(t testing.TB) []byte {
	t.Helper()
	if p.tarball != nil {
		return p.tarball
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range p.files {
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// fakeRegistry is a loopback npm registry: packuments (abbreviated form)
// and tarballs, built by the test. It counts requests and, with a token
// set, refuses requests without it.
type fakeRegistry struct {
	srv      *httptest.Server
	token    string
	requests atomic.Int64

	mu       sync.Mutex
	pkgs     map[string][]testPkg // guarded by mu
	tarballs map[string][]byte    // path: bytes; guarded by mu
	// served, guarded by mu, maps a tarball path to other bytes than the
	// ones the metadata hashes (a registry swapping content).
	served map[string][]byte
}

func newFakeRegistry(t testing.TB, token string) *fakeRegistry {
	r := &fakeRegistry{token: token, pkgs: map[string][]testPkg{}, tarballs: map[string][]byte{}, served: map[string][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fakeRegistry) url() string { return r.srv.URL + "/" }

func (r *fakeRegistry) add(t testing.TB, p testPkg) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	base := path.Base(p.name)
	tp := "/" + p.name + "/-/" + base + "-" + p.version + ".tgz"
	r.tarballs[tp] = p.tgz(t)
	if p.integrity == "" {
		p.integrity = sri(r.tarballs[tp])
	}
	r.pkgs[p.name] = append(r.pkgs[p.name], p)
}

// swap makes the registry serve other bytes for a version's tarball
// while its metadata keeps the old hash.
func (r *fakeRegistry) swap(t *testing.T, p testPkg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.served["/"+p.name+"/-/"+path.Base(p.name)+"-"+p.version+".tgz"] = p.tgz(t)
}

func (r *fakeRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	if r.token != "" && req.Header.Get("Authorization") != "Bearer "+r.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	p, err := url.PathUnescape(req.URL.EscapedPath())
	if err != nil {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.Contains(p, "/-/") {
		data, ok := r.served[p]
		if !ok {
			data, ok = r.tarballs[p]
		}
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(data)
		return
	}
	name := strings.TrimPrefix(p, "/")
	versions, ok := r.pkgs[name]
	if !ok {
		http.Error(w, `{"error":"Not found"}`, http.StatusNotFound)
		return
	}
	doc := map[string]any{"name": name}
	vs := map[string]any{}
	latest := ""
	for _, v := range versions {
		var pj map[string]any
		json.Unmarshal([]byte(v.files["package.json"]), &pj)
		pj["dist"] = map[string]any{
			"integrity": v.integrity,
			"tarball":   r.srv.URL + "/" + v.name + "/-/" + path.Base(v.name) + "-" + v.version + ".tgz",
		}
		vs[v.version] = pj
		if !strings.Contains(v.version, "-") {
			latest = v.version
		}
	}
	doc["versions"] = vs
	doc["dist-tags"] = map[string]string{"latest": latest}
	w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
	json.NewEncoder(w).Encode(doc)
}

// pkgJSON is a package.json for a test package.
func pkgJSON(name, version string, extra map[string]any) string {
	m := map[string]any{"name": name, "version": version}
	for k, v := range extra {
		m[k] = v
	}
	data, _ := json.MarshalIndent(m, "", "  ")
	return string(data)
}

// TestRegistryBoundsResponseWait: a registry that accepts connections
// and never answers fails the install within responseWait, naming the
// registry, instead of holding it for the client's whole timeout; it
// says it is waiting after stallNotice.
func TestRegistryBoundsResponseWait(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	})
	defer func(w, n time.Duration) { responseWait, stallNotice = w, n }(responseWait, stallNotice)
	responseWait, stallNotice = time.Second, 100*time.Millisecond
	var mu sync.Mutex
	var said []string
	in := &Installer{NPM: NPMConfig{Registry: "http://" + ln.Addr().String() + "/"}, Progress: func(s string) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, s)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = in.registry().packument(ctx, "some-server")
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("packument from a registry that never answers: %v after %s, want a timeout naming it", err, time.Since(start))
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "no answer yet from " + ln.Addr().String() + " after 100ms (mcpbox gives up after 1s)"; !slices.Contains(said, want) {
		t.Fatalf("the install said %q while it waited; want %q", said, want)
	}
}

// TestRegistryBoundsBody: a body past the limit is refused as mcpbox's
// bound, before it is read when its length is said, and after limit+1
// bytes when it is not (chunked).
func TestRegistryBoundsBody(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		}
		io.WriteString(w, big)
	}))
	defer srv.Close()
	r := &registry{client: &http.Client{Timeout: 10 * time.Second}}
	for _, p := range []string{"/said", "/chunked"} {
		u, _ := url.Parse(srv.URL + p)
		if _, err := r.get(context.Background(), u, "", 2<<20); err == nil || !strings.Contains(err.Error(), "is larger than the 2 MiB mcpbox reads from a registry for it") {
			t.Errorf("%s: %v, want mcpbox's bound named", p, err)
		}
	}
}
