package pkginstall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main() // the install sandboxes re-execute this binary as their init
	os.Exit(m.Run())
}

// allowDegraded: the tests need namespaces, not cgroup limits.
var allowDegraded = []sandbox.Layer{sandbox.LayerCgroups}

func requireNPM(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("no npm on this host")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node on this host")
	}
}

const testToken = "npm_testtoken_5ecr3t_do_not_leak"

// world is a loopback registry with a server package, its dependency
// (whose postinstall attacks), a fake HOME holding a planted private key
// and an .npmrc with the registry's token, and a TCP port no sandbox may
// reach.
type world struct {
	reg      *fakeRegistry
	home     string
	planted  string
	other    net.Listener
	accepted atomic.Int64
	in       *Installer
}

const serverJS = `#!/usr/bin/env node
const fs = require('fs');
let write = 'ok';
try { fs.writeFileSync(__dirname + '/written', 'x'); } catch (e) { write = 'ERR ' + e.code; }
console.log('hello from @test/server ' + require('dep-a') + ' args=' + process.argv.slice(2).join(',') + ' write=' + write);
`

// postinstallJS tries what a hostile install script would: host files
// (by absolute path and through HOME), the credentials, the network.
const postinstallJS = `
const fs = require('fs'), net = require('net');
const report = {ran: true};
const read = p => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return 'ERR ' + e.code; } };
report.planted = read(%q);
report.home = read((process.env.HOME || '/nonexistent') + '/.ssh/id_ed25519');
report.npmrc = read(%q);
report.secret = read('/run/secrets/npmrc');
report.env = JSON.stringify(process.env);
const dial = (port, next) => {
  const s = net.connect({host: '127.0.0.1', port});
  const t = setTimeout(() => { s.destroy(); next('ERR timeout'); }, 5000);
  s.on('connect', () => { clearTimeout(t); s.end(); next('connected'); });
  s.on('error', e => { clearTimeout(t); next('ERR ' + e.code); });
};
dial(%d, r => { report.other = r; dial(%d, r => { report.registry = r; dial(3128, r => {
  report.proxy = r; fs.appendFileSync('report.jsonl', JSON.stringify(report) + '\n'); }); }); });
`

func newWorld(t *testing.T) *world {
	t.Helper()
	requireNPM(t)
	w := &world{reg: newFakeRegistry(t, testToken)}
	var err error
	if w.other, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.other.Close() })
	go func() {
		for {
			c, err := w.other.Accept()
			if err != nil {
				return
			}
			w.accepted.Add(1)
			c.Close()
		}
	}()

	w.home = t.TempDir()
	w.planted = filepath.Join(w.home, ".ssh", "id_ed25519")
	os.MkdirAll(filepath.Dir(w.planted), 0o700)
	if err := os.WriteFile(w.planted, []byte("PLANTED-PRIVATE-KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(w.reg.srv.URL, "http://")
	npmrc := fmt.Sprintf("registry=%s\n//%s/:_authToken=${TEST_NPM_TOKEN}\n", w.reg.url(), host)
	if err := os.WriteFile(filepath.Join(w.home, ".npmrc"), []byte(npmrc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": w.home, "TEST_NPM_TOKEN": testToken}
	cfg, err := LoadNPMConfig(func(k string) string { return env[k] }, "")
	if err != nil {
		t.Fatal(err)
	}

	_, regPort, _ := net.SplitHostPort(host)
	var port int
	fmt.Sscan(regPort, &port)
	for _, v := range []string{"2.0.0", "2.1.0", "3.0.0"} {
		files := map[string]string{"index.js": fmt.Sprintf("module.exports = 'dep-a %s';\n", v)}
		extra := map[string]any{"main": "index.js"}
		if v == "2.1.0" {
			files["postinstall.js"] = fmt.Sprintf(postinstallJS, w.planted, filepath.Join(w.home, ".npmrc"), w.other.Addr().(*net.TCPAddr).Port, port)
			extra["scripts"] = map[string]string{"postinstall": "node postinstall.js"}
		}
		files["package.json"] = pkgJSON("dep-a", v, extra)
		w.reg.add(t, testPkg{name: "dep-a", version: v, files: files})
	}
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0-beta.1"} {
		w.reg.add(t, testPkg{name: "@test/server", version: v, files: map[string]string{
			"package.json": pkgJSON("@test/server", v, map[string]any{
				"bin":          map[string]string{"test-server": "bin/server.js"},
				"dependencies": map[string]string{"dep-a": "^2.0.0"},
			}),
			"bin/server.js": serverJS,
		}})
	}
	// The store's path holds a pattern's metacharacters: it is under a
	// state dir that a config names.
	w.in = &Installer{Store: filepath.Join(t.TempDir(), "st[x"), NPM: cfg, AllowDegraded: allowDegraded, Limits: sandbox.Limits{Timeout: 2 * time.Minute}}
	return w
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// storeEntries lists what the store holds besides its staging dir.
func storeEntries(t *testing.T, store string) []string {
	var out []string
	filepath.WalkDir(store, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == manifestName {
			out = append(out, filepath.Dir(p))
		}
		return nil
	})
	return out
}

func stagingLeft(t *testing.T, store string) []string {
	ents, _ := os.ReadDir(filepath.Join(store, ".tmp"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestInstallNPMRunsInServerSandbox(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	var progress []string
	w.in.Progress = func(s string) { progress = append(progress, s) }
	var mu sync.Mutex
	var events []egress.Event
	w.in.EgressLog = func(e egress.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	pkg, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "@test/server", Version: "^1.0.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Pin.Version != "1.1.0" || pkg.FromStore {
		t.Fatalf("installed %+v, want 1.1.0 freshly (the highest of ^1.0.0)", pkg.Pin)
	}
	if !sameDigest(pkg.Pin.Integrity, w.reg.pkgs["@test/server"][1].integrity) || pkg.Pin.Lockfile == "" {
		t.Fatalf("pin %+v: want the registry's integrity and a lockfile hash", pkg.Pin)
	}
	if pkg.Bin != "test-server" || pkg.Bins["test-server"] != "node_modules/@test/server/bin/server.js" {
		t.Fatalf("bin %q of %v", pkg.Bin, pkg.Bins)
	}
	if len(progress) == 0 {
		t.Error("no progress reported")
	}
	// npm's traffic went through the install sandbox's proxy, to the
	// registry alone.
	mu.Lock()
	regHost := strings.TrimPrefix(w.reg.srv.URL, "http://")
	for _, e := range events {
		if e.Decision != "allow" || net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) != regHost {
			t.Errorf("install sandbox connection %+v, want only allowed ones to %s", e, regHost)
		}
	}
	if len(events) == 0 {
		t.Error("no connection through the install sandbox's proxy: where did npm fetch from?")
	}
	mu.Unlock()
	if got := stagingLeft(t, w.in.Store); len(got) != 0 {
		t.Errorf("staging dirs left behind: %v", got)
	}
	if _, err := os.Stat(filepath.Join(pkg.Dir, "node_modules", "dep-a", "report.jsonl")); err != nil {
		t.Errorf("the dependency's postinstall did not run: %v", err)
	}

	// The server sandbox: the tree read-only at a path of its own, no
	// network, the host's node on the bin.
	code, out, errOut := runInstalled(t, ctx, pkg, []string{"a", "b"})
	if code != 0 {
		t.Fatalf("server exited %d: %s", code, errOut)
	}
	if got, want := out, "hello from @test/server dep-a 2.1.0 args=a,b write=ERR EROFS"; got != want {
		t.Fatalf("server said %q, want %q", got, want)
	}
}

func TestInstallScriptsContained(t *testing.T) {
	w := newWorld(t)
	pkg, err := w.in.Install(ctxT(t), Source{Ecosystem: NPM, Name: "dep-a", Version: "2.1.0"}, nil)
	if err == nil || !errors.Is(err, errNoBin) {
		t.Fatalf("install of a package without bins: %v, want the no-bin error", err)
	}
	_ = pkg
	pkg, err = w.in.Install(ctxT(t), Source{Ecosystem: NPM, Name: "@test/server", Version: "1.0.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(pkg.Dir, "node_modules", "dep-a", "report.jsonl"))
	if err != nil {
		t.Fatalf("the postinstall left no report, so it did not run: %v", err)
	}
	// Once: in the scripts sandbox, never in the fetching one, which holds
	// the credentials.
	if n := bytes.Count(data, []byte("\n")); n != 1 {
		t.Fatalf("the postinstall ran %d times, want once", n)
	}
	var rep map[string]any
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	// The same reads succeed on the host: the files are there to steal.
	for _, f := range []string{w.planted, filepath.Join(w.home, ".npmrc")} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatalf("control: %v", err)
		}
	}
	for _, k := range []string{"planted", "home", "npmrc", "secret", "other", "registry", "proxy"} {
		v, _ := rep[k].(string)
		if !strings.HasPrefix(v, "ERR ") {
			t.Errorf("install script %s: %q, want an error", k, v)
		}
	}
	if strings.Contains(string(data), testToken) || strings.Contains(string(data), "PLANTED") {
		t.Errorf("install script saw the token or the planted key: %s", data)
	}
	if n := w.accepted.Load(); n != 0 {
		t.Errorf("the other loopback port accepted %d connections", n)
	}
	// Nothing of the credentials lands in the store.
	filepath.WalkDir(w.in.Store, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(testToken)) {
				t.Errorf("%s holds the registry token", p)
			}
		}
		return nil
	})
}

func TestInstallSecondTimeNoNetwork(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	steps := recordSteps(w.in)
	first, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "@test/server", Version: "latest"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Pin.Version != "1.1.0" {
		t.Fatalf("latest resolved to %s, want 1.1.0 (not the prerelease)", first.Pin.Version)
	}
	// Checked once, between the archive's download and the install of
	// its dependencies (the long part).
	if got := strings.Join(*steps, "; "); !regexp.MustCompile(`^resolving [^;]*; downloading [^;]*; checked; installing `).MatchString(got) {
		t.Errorf("the first install's steps: %s; want checked once, after the download", got)
	}
	*steps = nil
	w.reg.requests.Store(0)
	pin := first.Pin
	for _, tc := range []struct {
		name string
		src  Source
		pin  *Pin
	}{
		{"pin", pin.Source(), &pin},
		{"exact version", Source{Ecosystem: NPM, Name: "@test/server", Version: "1.1.0", Bin: "test-server"}, nil},
	} {
		again, err := w.in.Install(ctx, tc.src, tc.pin)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !again.FromStore || again.Dir != first.Dir || again.Pin != first.Pin {
			t.Errorf("%s: second install %+v, want the first's entry from the store", tc.name, again)
		}
	}
	if n := w.reg.requests.Load(); n != 0 {
		t.Errorf("second installs made %d registry requests, want none", n)
	}
	if slices.Contains(*steps, "checked") {
		t.Errorf("an install from the store was checked: %q", *steps)
	}
	if got := storeEntries(t, w.in.Store); len(got) != 1 {
		t.Errorf("store entries %v, want one", got)
	}
}

func TestInstallIntegrityMismatch(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	// Metadata claims one hash, the tarball has another.
	w.reg.add(t, testPkg{name: "evil", version: "1.0.0", integrity: sri([]byte("other bytes")), files: map[string]string{
		"package.json": pkgJSON("evil", "1.0.0", map[string]any{"bin": "cli.js"}), "cli.js": "1",
	}})
	_, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "evil", Version: "1.0.0"}, nil)
	var ie *IntegrityError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "evil@1.0.0") {
		t.Fatalf("install of a tarball not matching its metadata: %v, want an integrity error naming it", err)
	}
	t.Log(err)
	if got := storeEntries(t, w.in.Store); len(got) != 0 {
		t.Errorf("store entries after a refused install: %v", got)
	}
	if got := stagingLeft(t, w.in.Store); len(got) != 0 {
		t.Errorf("staging left after a refused install: %v", got)
	}
}

func TestPinVerify(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	pkg, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "@test/server", Version: "1.0.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.in.Verify(ctx, pkg.Pin); err != nil {
		t.Fatalf("verify against an unchanged registry: %v", err)
	}
	// The registry now serves other bytes under the same metadata.
	changed := w.reg.pkgs["@test/server"][0]
	changed.files = map[string]string{"package.json": changed.files["package.json"], "bin/server.js": "require('child_process').exec('curl evil')"}
	w.reg.swap(t, changed)
	err = w.in.Verify(ctx, pkg.Pin)
	if !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("verify after the bytes changed: %v, want ErrPinMismatch", err)
	}
	t.Log(err)
	// A fresh store refuses to install the pin from that registry.
	fresh := *w.in
	fresh.Store = t.TempDir()
	if _, err := fresh.Install(ctx, pkg.Pin.Source(), &pkg.Pin); err == nil {
		t.Fatal("install of a pin whose bytes changed succeeded")
	}
	if got := storeEntries(t, fresh.Store); len(got) != 0 {
		t.Errorf("store entries after a refused install: %v", got)
	}
	// Republished metadata under the same version: refused by metadata.
	w.reg.mu.Lock()
	w.reg.pkgs["@test/server"][0].integrity = sri([]byte("republished"))
	w.reg.mu.Unlock()
	if err := w.in.Verify(ctx, pkg.Pin); !errors.Is(err, ErrPinMismatch) || !strings.Contains(err.Error(), "registry metadata") {
		t.Fatalf("verify after the metadata changed: %v", err)
	}
	if _, err := fresh.Install(ctx, pkg.Pin.Source(), &pkg.Pin); !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("install after the metadata changed: %v, want ErrPinMismatch", err)
	}
}

// recordSteps makes in record its progress lines and its Checked calls
// ("checked"), in order; in installs one package at a time.
func recordSteps(in *Installer) *[]string {
	var steps []string
	in.Progress = func(s string) { steps = append(steps, s) }
	in.Checked = func() { steps = append(steps, "checked") }
	return &steps
}

func TestInstallUnknownPackage(t *testing.T) {
	w := newWorld(t)
	steps := recordSteps(w.in)
	defer func() {
		if slices.Contains(*steps, "checked") {
			t.Errorf("a package that is not there was checked: %q", *steps)
		}
	}()
	_, err := w.in.Install(ctxT(t), Source{Ecosystem: NPM, Name: "@test/nope", Version: "latest"}, nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "@test/nope") {
		t.Fatalf("unknown package: %v, want a not-found error naming it", err)
	}
	_, err = w.in.Install(ctxT(t), Source{Ecosystem: NPM, Name: "@test/server", Version: "^7"}, nil)
	if err == nil || !strings.Contains(err.Error(), `no version matches "^7"`) {
		t.Fatalf("unknown version: %v", err)
	}
}

func TestInstallRegistryRefusal(t *testing.T) {
	w := newWorld(t)
	w.in.NPM.Auth = nil // no token: the registry answers 401
	_, err := w.in.Install(ctxT(t), Source{Ecosystem: NPM, Name: "@test/server", Version: "1.0.0"}, nil)
	var re *RegistryError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("registry refusal: %v", err)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Fatal("error holds the token")
	}
}

// What install scripts leave behind is made fit to share, or refused.
func TestInstallSanitizesTree(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	script := func(js string) map[string]string {
		return map[string]string{"postinstall": "node -e " + strconvQuote(js)}
	}
	w.reg.add(t, testPkg{name: "suid", version: "1.0.0", files: map[string]string{
		"package.json": pkgJSON("suid", "1.0.0", map[string]any{"bin": "cli.js",
			"scripts": script(`const fs=require('fs'); fs.mkdirSync('d');
for (const [p, m] of [['cli.js', 0o6777], ['cli.js', 0o777], ['d', 0o1777], ['d', 0o777]]) {
  try { fs.chmodSync(p, m); console.error(p, 'now', m.toString(8)); } catch (e) { console.error(p, m.toString(8), e.code); }
}`)}),
		"cli.js": "console.log(1)",
	}})
	pkg, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "suid", Version: "1.0.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]os.FileMode{"cli.js": 0o755, "d": os.ModeDir | 0o755} {
		fi, err := os.Stat(filepath.Join(pkg.Dir, "node_modules", "suid", rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), want)
		}
	}

	w.reg.add(t, testPkg{name: "fifo", version: "1.0.0", files: map[string]string{
		"package.json": pkgJSON("fifo", "1.0.0", map[string]any{"bin": "cli.js",
			"scripts": script(`require('child_process').execFileSync('mkfifo', ['pipe'])`)}),
		"cli.js": "console.log(1)",
	}})
	_, err = w.in.Install(ctx, Source{Ecosystem: NPM, Name: "fifo", Version: "1.0.0"}, nil)
	if err == nil || !strings.Contains(err.Error(), "named pipe: refused") {
		t.Fatalf("install leaving a named pipe: %v", err)
	}
	if got := storeEntries(t, w.in.Store); len(got) != 1 {
		t.Errorf("store entries %v, want only suid's", got)
	}
}

// Install scripts write anywhere in the tree being built: a planted
// symlink where the installer writes, or a rewritten lockfile, refuses
// the install, and no host file is written through.
func TestInstallScriptsCannotPlant(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	for _, tt := range []struct{ name, js, err string }{
		{"planter", fmt.Sprintf(`require('fs').symlinkSync(%q, '../../.mcpbox-package.json')`, w.planted), "file exists"},
		{"relock", `require('fs').appendFileSync('../../package-lock.json', ' ')`, "install scripts changed the lockfile"},
		{"linklock", fmt.Sprintf(`const fs = require('fs'); fs.unlinkSync('../../package-lock.json'); fs.symlinkSync(%q, '../../package-lock.json')`, w.planted), "not a regular file"},
	} {
		w.reg.add(t, testPkg{name: tt.name, version: "1.0.0", files: map[string]string{
			"package.json": pkgJSON(tt.name, "1.0.0", map[string]any{"bin": "cli.js",
				"scripts": map[string]string{"postinstall": "node -e " + strconvQuote(tt.js)}}),
			"cli.js": "console.log(1)",
		}})
		_, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: tt.name, Version: "1.0.0"}, nil)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.err)
		}
	}
	if b, _ := os.ReadFile(w.planted); string(b) != "PLANTED-PRIVATE-KEY" {
		t.Errorf("the host file was written through a planted link: %q", b)
	}
	if got := storeEntries(t, w.in.Store); len(got) != 0 {
		t.Errorf("store entries %v, want none", got)
	}
}

func strconvQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Two installers on one store (two gateways starting together) that
// want the same package build it once: the second waits for the first's
// entry instead of building its own.
func TestInstallConcurrent(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	type result struct {
		pkg   *Package
		err   error
		steps []string
	}
	results := make(chan result, 2)
	for range 2 {
		in := *w.in
		go func() {
			var steps []string
			in.Progress = func(s string) { steps = append(steps, s) }
			p, err := in.Install(ctx, Source{Ecosystem: NPM, Name: "@test/server", Version: "^1.0.0"}, nil)
			results <- result{p, err, steps}
		}()
	}
	a, b := <-results, <-results
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if a.pkg.Dir != b.pkg.Dir || a.pkg.Pin != b.pkg.Pin {
		t.Errorf("two installs disagree: %+v, %+v", a.pkg, b.pkg)
	}
	if a.pkg.FromStore == b.pkg.FromStore {
		t.Errorf("FromStore %v and %v, want one install to build the entry and the other to find it", a.pkg.FromStore, b.pkg.FromStore)
	}
	var builds int
	for _, s := range slices.Concat(a.steps, b.steps) {
		if strings.HasPrefix(s, "installed ") {
			builds++
		}
	}
	if builds != 1 {
		t.Errorf("the package was built %d times, want once; steps:\n%q\n%q", builds, a.steps, b.steps)
	}
	if got := storeEntries(t, w.in.Store); len(got) != 1 {
		t.Errorf("store entries %v, want one", got)
	}
	if got := stagingLeft(t, w.in.Store); len(got) != 0 {
		t.Errorf("staging left: %v", got)
	}
}

// An install that waited for another's entry checks that entry against
// its pin as one found in the store at the start is: a pin whose
// lockfile the entry does not have is refused, not handed that entry.
func TestInstallAfterWaitChecksPin(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	built, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "@test/server", Version: "1.1.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := *w.in
	other.Store = t.TempDir()
	waiting := make(chan struct{})
	var once sync.Once
	other.Progress = func(s string) {
		if strings.HasPrefix(s, "waiting for another install") {
			once.Do(func() { close(waiting) })
		}
	}
	rel, err := filepath.Rel(w.in.Store, built.Dir)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(other.Store, rel)
	unlock, err := lockEntry(ctx, other.Store, dst, func() {})
	if err != nil {
		t.Fatal(err)
	}
	pin := built.Pin
	pin.Lockfile = "sha512-" + strings.Repeat("A", 86) + "=="
	done := make(chan error, 1)
	go func() {
		_, err := other.Install(ctx, pin.Source(), &pin)
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		unlock()
		t.Fatalf("the install ended without waiting for the held entry: %v", err)
	case <-ctx.Done():
		unlock()
		t.Fatal("the install never waited for the held entry")
	}
	// The other install's entry appears, then its lock is released.
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", built.Dir, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	unlock()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "differs from the pinned") {
		t.Errorf("install of a pin whose lockfile the waited-for entry lacks: %v, want it refused", err)
	}
}

// A pin covers the dependencies too: after a dependency publishes a new
// matching version, the pin alone is refused, and the pin with its
// lockfile installs exactly the pinned tree.
func TestInstallLockedReproducesDeps(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	pkg, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "@test/server", Version: "1.1.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := pkg.Lockfile()
	if err != nil {
		t.Fatal(err)
	}
	w.reg.add(t, testPkg{name: "dep-a", version: "2.2.0", files: map[string]string{
		"package.json": pkgJSON("dep-a", "2.2.0", map[string]any{"main": "index.js"}),
		"index.js":     "module.exports = 'dep-a 2.2.0, published after the pin';\n",
	}})
	fresh := *w.in
	fresh.Store = t.TempDir()
	if _, err := fresh.Install(ctx, pkg.Pin.Source(), &pkg.Pin); !errors.Is(err, ErrPinMismatch) || !strings.Contains(err.Error(), "dependencies now resolve") {
		t.Fatalf("install of the pin after its dependency moved: %v, want ErrPinMismatch", err)
	}
	if _, err := fresh.InstallLocked(ctx, pkg.Pin, append([]byte(" "), lock...)); !errors.Is(err, ErrLockfileMismatch) {
		t.Fatalf("InstallLocked with a lockfile not matching the pin: %v, want ErrLockfileMismatch", err)
	}
	again, err := fresh.InstallLocked(ctx, pkg.Pin, lock)
	if err != nil {
		t.Fatal(err)
	}
	if again.Pin != pkg.Pin {
		t.Errorf("pin %+v, want %+v", again.Pin, pkg.Pin)
	}
	dep, err := os.ReadFile(filepath.Join(again.Dir, "node_modules", "dep-a", "index.js"))
	if err != nil || !strings.Contains(string(dep), "dep-a 2.1.0") {
		t.Errorf("dependency installed from the lockfile: %q, %v; want 2.1.0", dep, err)
	}
	// And again, from the store: no network.
	w.reg.requests.Store(0)
	if p, err := fresh.InstallLocked(ctx, pkg.Pin, lock); err != nil || !p.FromStore || w.reg.requests.Load() != 0 {
		t.Errorf("second locked install: %+v, %v, %d requests", p, err, w.reg.requests.Load())
	}
}

// TestNPMSandboxSeesHostBundle: npm in the install sandbox is pointed at
// the host's CA bundle (Node trusts only its own list otherwise, so a
// registry behind a TLS proxy the host trusts failed with
// SELF_SIGNED_CERT_IN_CHAIN), and that file is readable there, with the
// host's content.
func TestNPMSandboxSeesHostBundle(t *testing.T) {
	want := hostBundle()
	if want == "" {
		t.Skip("no system CA bundle on this host")
	}
	in := &Installer{AllowDegraded: allowDegraded}
	spec := in.npmSpec(t.TempDir(), t.TempDir())
	if !slices.Contains(spec.Env, "NODE_EXTRA_CA_CERTS="+want) {
		t.Fatalf("install sandbox env %q has no NODE_EXTRA_CA_CERTS=%s", spec.Env, want)
	}
	spec.Args = []string{"/bin/sh", "-c", `cat "$NODE_EXTRA_CA_CERTS"`}
	spec.Limits.Timeout = time.Minute
	var out, errOut bytes.Buffer
	res, err := sandbox.Run(ctxT(t), spec, sandbox.Stdio{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !bytes.Equal(out.Bytes(), host) {
		t.Fatalf("reading %s in the install sandbox: exit %d, %d bytes (host: %d): %s", want, res.ExitCode, out.Len(), len(host), errOut.String())
	}
}

// addonC is a Node-API add-on in C: hello() returns "native hello".
const addonC = `#include <node_api.h>
static napi_value hello(napi_env env, napi_callback_info info) {
  napi_value s;
  napi_create_string_utf8(env, "native hello", NAPI_AUTO_LENGTH, &s);
  return s;
}
NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "hello", NAPI_AUTO_LENGTH, hello, NULL, &fn);
  napi_set_named_property(env, exports, "hello", fn);
  return exports;
}
`

// TestInstallBuildsNativeAddon: an add-on with no prebuilt binary is
// built from source by its install script (node-gyp), offline, against
// the host node's headers; node-gyp went to nodejs.org for them, which
// the scripts sandbox cannot reach, and the install failed.
func TestInstallBuildsNativeAddon(t *testing.T) {
	if nodeHeaders("node") == "" {
		t.Skip("the host's node has no headers under /usr (PREFIX/include/node/common.gypi)")
	}
	for _, tool := range []string{"make", "g++", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s to build an add-on with", tool)
		}
	}
	w := newWorld(t)
	ctx := ctxT(t)
	w.reg.add(t, testPkg{name: "native-addon", version: "1.0.0", files: map[string]string{
		"package.json": pkgJSON("native-addon", "1.0.0", map[string]any{"bin": map[string]string{"native": "bin/run.js"}}),
		"binding.gyp":  `{"targets": [{"target_name": "addon", "sources": ["addon.c"]}]}`,
		"addon.c":      addonC,
		"bin/run.js":   "#!/usr/bin/env node\nconsole.log(require('../build/Release/addon.node').hello());\n",
	}})
	pkg, err := w.in.Install(ctx, Source{Ecosystem: NPM, Name: "native-addon", Version: "1.0.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, got, errOut := runInstalled(t, ctx, pkg, nil); code != 0 || got != "native hello" {
		t.Fatalf("the add-on's bin exited %d, said %q: %s", code, got, errOut)
	}
}

// runInstalled runs pkg's bin with args in a server sandbox: the tree
// read-only at a path of its own, no network, the host's interpreter;
// it returns the exit code and the trimmed stdout, and stderr.
func runInstalled(t *testing.T, ctx context.Context, pkg *Package, args []string) (code int, stdout, stderr string) {
	t.Helper()
	const target = "/opt/mcpbox/pkg"
	var out, errOut bytes.Buffer
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Args:          pkg.Command(target, args),
		Env:           pkg.Env(target),
		Mounts:        []sandbox.Mount{pkg.Mount(target)},
		AllowDegraded: allowDegraded,
		Limits:        sandbox.Limits{Timeout: time.Minute},
	}, sandbox.Stdio{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode, strings.TrimSpace(out.String()), errOut.String()
}
