package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// npmRegistry is a loopback npm registry serving real packages packed
// from test/e2e/node/node_modules (as internal/pkginstall's tests do):
// abbreviated packuments and tarballs. It counts requests.
type npmRegistry struct {
	srv      *httptest.Server
	requests atomic.Int64
	// token, if set, is required as "Bearer TOKEN" on every request
	// (a private registry); refused counts those without it.
	token   string
	refused atomic.Int64
	// gate, if set, is called with each request's unescaped path before
	// it is answered (outside mu).
	gate func(path string)

	mu sync.Mutex
	// versions maps a name to its versions' package.json and tarball.
	// guarded by mu
	versions map[string]map[string]npmVersion
}

type npmVersion struct {
	pkgJSON []byte
	tarball []byte
}

// newNPMRegistry serves every package of root (nested node_modules too).
func newNPMRegistry(t testing.TB, root string) *npmRegistry {
	t.Helper()
	r := &npmRegistry{versions: map[string]map[string]npmVersion{}}
	var walk func(nm string)
	walk = func(nm string) {
		ents, _ := os.ReadDir(nm)
		for _, e := range ents {
			switch {
			case strings.HasPrefix(e.Name(), "."):
			case strings.HasPrefix(e.Name(), "@"):
				sub, _ := os.ReadDir(filepath.Join(nm, e.Name()))
				for _, s := range sub {
					r.addDir(t, filepath.Join(nm, e.Name(), s.Name()))
					walk(filepath.Join(nm, e.Name(), s.Name(), "node_modules"))
				}
			default:
				r.addDir(t, filepath.Join(nm, e.Name()))
				walk(filepath.Join(nm, e.Name(), "node_modules"))
			}
		}
	}
	walk(root)
	if len(r.versions) < 10 {
		t.Skipf("only %d packages under %s", len(r.versions), root)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *npmRegistry) url() string { return r.srv.URL + "/" }

func (r *npmRegistry) addDir(t testing.TB, dir string) {
	pj, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return
	}
	var m struct{ Name, Version string }
	if json.Unmarshal(pj, &m) != nil || m.Name == "" || m.Version == "" {
		return
	}
	if r.versions[m.Name] == nil {
		r.versions[m.Name] = map[string]npmVersion{}
	}
	if _, ok := r.versions[m.Name][m.Version]; !ok {
		r.versions[m.Name][m.Version] = npmVersion{pkgJSON: pj, tarball: packedDir(t, dir)}
	}
}

// republish replaces the bytes of every version of name with its files
// plus extra (a registry serving other content for a pinned version, with
// metadata that matches the new bytes).
func (r *npmRegistry) republish(t *testing.T, name, dir string, extra map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for v, nv := range r.versions[name] {
		nv.tarball = npmPack(t, dir, extra)
		r.versions[name][v] = nv
	}
}

func (r *npmRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	if r.token != "" && req.Header.Get("Authorization") != "Bearer "+r.token {
		r.refused.Add(1)
		http.Error(w, `{"error":"authentication required"}`, http.StatusUnauthorized)
		return
	}
	p, err := url.PathUnescape(req.URL.EscapedPath())
	if err != nil {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	if r.gate != nil {
		r.gate(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, file, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/-/"); ok {
		for v, nv := range r.versions[name] {
			if file == path.Base(name)+"-"+v+".tgz" {
				w.Write(nv.tarball)
				return
			}
		}
		http.NotFound(w, req)
		return
	}
	name := strings.TrimPrefix(p, "/")
	versions, ok := r.versions[name]
	if !ok {
		http.Error(w, `{"error":"Not found"}`, http.StatusNotFound)
		return
	}
	vs := map[string]any{}
	latest := ""
	for v, nv := range versions {
		var pj map[string]any
		json.Unmarshal(nv.pkgJSON, &pj)
		sum := sha512.Sum512(nv.tarball)
		pj["dist"] = map[string]any{
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
			"tarball":   r.srv.URL + "/" + name + "/-/" + path.Base(name) + "-" + v + ".tgz",
		}
		vs[v] = pj
		if !strings.Contains(v, "-") && v > latest {
			latest = v
		}
	}
	w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
	json.NewEncoder(w).Encode(map[string]any{"name": name, "versions": vs, "dist-tags": map[string]string{"latest": latest}})
}

// packed holds the tarballs packedDir made, by directory, for the whole
// test binary: packing the ~120 packages of test/e2e/node takes ~15 s
// under the race detector (~50 s at gzip's default level), and more than
// a dozen tests each build a registry of them. The bytes are shared and never written to.
var packed sync.Map // dir -> *packOnce

type packOnce struct {
	once sync.Once
	data []byte
	err  error
}

// packedDir is npmPack of dir with no extra files, packed once.
func packedDir(t testing.TB, dir string) []byte {
	t.Helper()
	v, _ := packed.LoadOrStore(dir, new(packOnce))
	p := v.(*packOnce)
	p.once.Do(func() { p.data, p.err = packTarball(dir, nil) })
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.data
}

// npmPack is packTarball, failing t on an error.
func npmPack(t testing.TB, dir string, extra map[string]string) []byte {
	t.Helper()
	data, err := packTarball(dir, extra)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// packTarball packs a package directory as npm pack lays it out
// (package/...), without nested node_modules, with extra files added or
// replacing the directory's, at gzip's fastest level.
func packTarball(dir string, extra map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if _, replaced := extra[filepath.ToSlash(rel)]; replaced || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	for name, content := range extra {
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: "package/" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
		}
		if err == nil {
			_, err = tw.Write([]byte(content))
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	return buf.Bytes(), err
}

// publishAs publishes the package in dir once more under another version
// (a dependency's new release that its dependents' ranges accept).
func (r *npmRegistry) publishAs(t *testing.T, dir, version string) {
	t.Helper()
	r.publishEdited(t, dir, "version", version)
}

// publishNamed publishes the package in dir under another name (its
// version kept): a package that appears in the registry later.
func (r *npmRegistry) publishNamed(t *testing.T, dir, name string) {
	t.Helper()
	r.publishEdited(t, dir, "name", name)
}

// publishEdited publishes the package in dir with one field of its
// package.json set to value.
func (r *npmRegistry) publishEdited(t *testing.T, dir, field, value string) {
	t.Helper()
	var pj map[string]any
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &pj)
	}
	if err != nil {
		t.Fatal(err)
	}
	pj[field] = value
	data, _ = json.MarshalIndent(pj, "", "  ")
	name, version := pj["name"].(string), pj["version"].(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.versions[name] == nil {
		r.versions[name] = map[string]npmVersion{}
	}
	r.versions[name][version] = npmVersion{pkgJSON: data, tarball: npmPack(t, dir, map[string]string{"package.json": string(data)})}
}

// unpublish removes one version of name.
func (r *npmRegistry) unpublish(name, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.versions[name], version)
}
