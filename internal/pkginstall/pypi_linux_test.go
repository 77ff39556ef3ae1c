package pkginstall

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/sandbox"
)

// buildWheel builds a pure-Python wheel as a build backend would: the
// package's files, METADATA, WHEEL, entry_points.txt and a RECORD with
// each file's hash.
func buildWheel(t *testing.T, name, version string, files map[string]string, requires []string, scripts map[string]string) (string, []byte) {
	t.Helper()
	dist := strings.ReplaceAll(name, "-", "_")
	info := fmt.Sprintf("%s-%s.dist-info/", dist, version)
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	all := map[string]string{
		info + "METADATA": meta + "\n",
		info + "WHEEL":    "Wheel-Version: 1.0\nGenerator: mcpbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	if len(scripts) > 0 {
		ep := "[console_scripts]\n"
		for k, v := range scripts {
			ep += k + " = " + v + "\n"
		}
		all[info+"entry_points.txt"] = ep
	}
	for k, v := range files {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Strings(names)
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, k := range names {
		w, _ := zw.Create(k)
		w.Write([]byte(all[k]))
		d := sha256.Sum256([]byte(all[k]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", k, base64.RawURLEncoding.EncodeToString(d[:]), len(all[k]))
	}
	record.WriteString(info + "RECORD,,\n")
	w, _ := zw.Create(info + "RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s-%s-py3-none-any.whl", dist, version), buf.Bytes()
}

// fakeIndex is a PEP 503 simple index on loopback behind basic auth.
type fakeIndex struct {
	srv        *httptest.Server
	user, pass string
	requests   atomic.Int64
	mu         sync.Mutex
	projects   map[string][]string // normalized name: file names; guarded by mu
	files      map[string][]byte   // guarded by mu
	listed     map[string][]byte   // bytes the page's hash is of, if not files'; guarded by mu
}

func newFakeIndex(t *testing.T) *fakeIndex {
	x := &fakeIndex{user: "alice", pass: "idx-pa55word", projects: map[string][]string{}, files: map[string][]byte{}, listed: map[string][]byte{}}
	x.srv = httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(x.srv.Close)
	return x
}

func (x *fakeIndex) add(project, file string, data []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := normalizePyPI(project)
	x.projects[n] = append(x.projects[n], file)
	x.files[file] = data
}

func (x *fakeIndex) indexURL() string {
	return "http://" + x.user + ":" + x.pass + "@" + strings.TrimPrefix(x.srv.URL, "http://") + "/simple/"
}

func (x *fakeIndex) serve(w http.ResponseWriter, r *http.Request) {
	x.requests.Add(1)
	if u, p, ok := r.BasicAuth(); !ok || u != x.user || p != x.pass {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if f, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		data, ok := x.files[f]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
		return
	}
	p, ok := strings.CutPrefix(r.URL.Path, "/simple/")
	files, known := x.projects[strings.TrimSuffix(p, "/")]
	if !ok || !known {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, "<!DOCTYPE html><html><body>\n")
	for _, f := range files {
		data := x.files[f]
		if l, ok := x.listed[f]; ok {
			data = l
		}
		d := sha256.Sum256(data)
		fmt.Fprintf(w, "<a href=\"../../files/%s#sha256=%s\">%s</a><br/>\n", html.EscapeString(f), hex.EncodeToString(d[:]), html.EscapeString(f))
	}
	fmt.Fprint(w, "</body></html>\n")
}

func requirePip(t *testing.T) {
	t.Helper()
	if err := exec.Command("python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skip("no python3 with pip on this host")
	}
}

func TestInstallPyPI(t *testing.T) {
	requirePip(t)
	x := newFakeIndex(t)
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0"} {
		f, data := buildWheel(t, "dep-b", v, map[string]string{"dep_b/__init__.py": fmt.Sprintf("VALUE = 'dep-b %s'\n", v)}, nil, nil)
		x.add("dep-b", f, data)
	}
	helloPy := "import sys, dep_b\n\ndef main():\n    w = 'ok'\n    try:\n        open(__file__ + '.x', 'w')\n    except OSError as e:\n        w = 'ERR ' + type(e).__name__\n    print('hello from hello-mcp', dep_b.VALUE, 'args=' + ','.join(sys.argv[1:]), 'write=' + w)\n"
	for _, v := range []string{"0.9.0", "1.0.0", "1.1.0rc1"} {
		f, data := buildWheel(t, "hello-mcp", v, map[string]string{"hello_mcp/__init__.py": helloPy},
			[]string{"dep-b>=1.0,<2"}, map[string]string{"hello-mcp": "hello_mcp:main"})
		x.add("hello-mcp", f, data)
	}
	// A package with only an sdist: building it would run its code.
	x.add("sdist-only", "sdist_only-1.0.0.tar.gz", []byte("not a wheel"))

	cfg, err := LoadPyPIConfig(envMap{"PIP_INDEX_URL": x.indexURL()}.get)
	if err != nil {
		t.Fatal(err)
	}
	in := &Installer{Store: t.TempDir(), PyPI: cfg, AllowDegraded: allowDegraded, Limits: sandbox.Limits{Timeout: 2 * time.Minute}}
	ctx := ctxT(t)
	src, args, ok, err := FromCommand([]string{"uvx", "hello-mcp", "a", "b"})
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	steps := recordSteps(in)
	pkg, err := in.Install(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	in.Progress, in.Checked = nil, nil
	if got := strings.Join(*steps, "; "); !regexp.MustCompile(`^resolving [^;]*; downloading [^;]*; checked; installing `).MatchString(got) {
		t.Errorf("the install's steps: %s; want checked once, after the wheel's download", got)
	}
	if pkg.Pin.Version != "1.0.0" || pkg.Bin != "hello-mcp" || !strings.HasPrefix(pkg.Pin.Integrity, "sha256-") || pkg.Pin.Lockfile == "" {
		t.Fatalf("installed %+v bin %q, want 1.0.0 (not the rc) with its hashes", pkg.Pin, pkg.Bin)
	}

	code, got, errOut := runInstalled(t, ctx, pkg, args)
	if want := "hello from hello-mcp dep-b 1.1.0 args=a,b write=ERR OSError"; code != 0 || got != want {
		t.Fatalf("server exited %d saying %q, want %q; stderr: %s", code, got, want, errOut)
	}

	// Nothing of the index credentials lands in the store.
	filepath.WalkDir(in.Store, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(x.pass)) {
				t.Errorf("%s holds the index password", p)
			}
		}
		return nil
	})
	if err := in.Verify(ctx, pkg.Pin); err != nil {
		t.Fatalf("verify against an unchanged index: %v", err)
	}

	// Second install: from the store, no requests.
	x.requests.Store(0)
	pin := pkg.Pin
	again, err := in.Install(ctx, pin.Source(), &pin)
	if err != nil || !again.FromStore || x.requests.Load() != 0 {
		t.Fatalf("second install: %+v, %v, %d requests", again, err, x.requests.Load())
	}

	// The index now lists other bytes for the pinned version.
	fresh := *in
	fresh.Store = t.TempDir()
	x.mu.Lock()
	x.listed["hello_mcp-1.0.0-py3-none-any.whl"] = []byte("swapped")
	x.mu.Unlock()
	if err := in.Verify(ctx, pin); !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("verify of a pin the index changed: %v, want ErrPinMismatch", err)
	}
	if _, err := fresh.Install(ctx, pin.Source(), &pin); !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("install of a pin the index changed: %v, want ErrPinMismatch", err)
	}
	// Unpinned, the listed hash no longer matches the served wheel.
	_, err = fresh.Install(ctx, Source{Ecosystem: PyPI, Name: "hello-mcp", Version: "1.0.0"}, nil)
	var ie *IntegrityError
	if !errors.As(err, &ie) {
		t.Fatalf("install of a wheel not matching its index hash: %v", err)
	}
	if got := storeEntries(t, fresh.Store); len(got) != 0 {
		t.Errorf("store entries after refused installs: %v", got)
	}

	for _, tt := range []struct{ src, err string }{
		{"pypi:nope", "not found"},
		{"pypi:sdist-only", "no pure-Python wheel"},
		{"pypi:hello-mcp@~=3.0", "no pure-Python wheel matches"},
	} {
		s, _ := ParseSource(tt.src)
		_, err := fresh.Install(ctx, s, nil)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want %q", tt.src, err, tt.err)
		}
		if err != nil && strings.Contains(err.Error(), x.pass) {
			t.Errorf("%s: error holds the index password: %v", tt.src, err)
		}
	}
}

type envMap map[string]string

func (m envMap) get(k string) string { return m[k] }
