package pkginstall

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"time"

	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox"
)

// Installer installs packages into a content-addressed store. Its zero
// value is not usable: Store must be set. An Installer may be used by
// several goroutines at once, and several processes may share one Store.
type Installer struct {
	// Store is the root of the content-addressed store (the state dir's
	// "packages"); created when missing. Entries are
	// ECOSYSTEM/NAME/VERSION/sha512-HEX and are never changed once in
	// place.
	Store string
	// NPM is the user's registry configuration (LoadNPMConfig); the zero
	// value is the public registry without credentials.
	NPM NPMConfig
	// PyPI is the user's index configuration (LoadPyPIConfig); the zero
	// value is PyPI without credentials.
	PyPI PyPIConfig
	// Client fetches metadata and archives from the host. Nil means a
	// client with a 5-minute timeout and the environment's proxy that
	// connects to a loopback, private or link-local address only when it
	// is a configured registry's or index's host and port
	// (egress.HostFetch): a registry chooses its archives' URLs and
	// redirects. A non-nil Client is used as it is.
	Client *http.Client
	// Limits bound each install sandbox; zero fields are none, except
	// Timeout (10 minutes) and TmpSize (1 GiB: npm's cache lives on
	// disk, but node and its scripts use /tmp).
	Limits sandbox.Limits
	// AllowDegraded names isolation layers an install sandbox may lose on
	// this host (as the servers' sandboxes may).
	AllowDegraded []sandbox.Layer
	// Progress, if non-nil, receives one line per install step, for the
	// first start of a server to show what it waits for.
	Progress func(string)
	// Checked, if non-nil, is called once an install that is not from
	// the store has found the package, at a version that matches, its
	// archive verified and a bin to run: what a mistyped name or version
	// fails, within seconds. Its dependencies' install, which takes
	// minutes, comes after.
	Checked func()
	// EgressLog, if non-nil, receives one event per connection the
	// fetching sandboxes make through their egress proxy (for the audit
	// log); it may be called from several goroutines.
	EgressLog func(egress.Event)
	// NPMCommand is the npm to run inside the install sandbox, which sees
	// the host's /usr; empty means "npm" found through the sandbox's
	// PATH.
	NPMCommand string
}

// Package is an installed package, ready to run in a server sandbox.
type Package struct {
	Pin Pin
	// Dir is the installed tree in the store, on the host. A server
	// sandbox mounts it read-only with exec allowed (see Mount); nothing
	// in it is secret.
	Dir string
	// Bins maps each bin name the package declares to its file, relative
	// to Dir.
	Bins map[string]string
	// Bin is the bin that Command runs: the one the source named, else
	// the one named like the package, else the only one.
	Bin string
	// FromStore reports whether the install found the package in the
	// store and used no network.
	FromStore bool
}

// Mount is the read-only, executable bind of the installed tree at target
// inside a server sandbox.
func (p *Package) Mount(target string) sandbox.Mount {
	return sandbox.Mount{Source: p.Dir, Target: target, Exec: true}
}

// Command is the argv that runs the package's bin with args in a sandbox
// that mounts the tree at target: the host's interpreter, never the
// bin's shebang or a writable copy.
func (p *Package) Command(target string, args []string) []string {
	argv := []string{interpreter(p.Pin.Ecosystem), path.Join(target, filepath.ToSlash(p.Bins[p.Bin]))}
	return append(argv, args...)
}

// Env is what the server sandbox's environment needs for Command: for
// PyPI the installed site dir on PYTHONPATH (and no bytecode writes to the
// read-only tree); nothing for npm.
func (p *Package) Env(target string) []string {
	if p.Pin.Ecosystem == PyPI {
		return []string{"PYTHONPATH=" + path.Join(target, "site"), "PYTHONDONTWRITEBYTECODE=1"}
	}
	return nil
}

func interpreter(e Ecosystem) string {
	if e == PyPI {
		return "python3"
	}
	return "node"
}

// Install makes src available in the store and returns it. With a pin
// whose entry is in the store, or an exact version of which the store
// holds one entry, it uses no network at all. Otherwise it resolves the
// version against the registry, checks the archive's integrity (and the
// pin's, if given), installs the package with its dependencies in
// sandboxes whose only way out is the registry, and renames the finished
// tree into place; on any error nothing is left in the store.
func (in *Installer) Install(ctx context.Context, src Source, pin *Pin) (*Package, error) {
	if in.Store == "" || !filepath.IsAbs(in.Store) {
		return nil, fmt.Errorf("installing %s: the package store must be an absolute path", src)
	}
	if err := src.check(); err != nil {
		return nil, fmt.Errorf("installing %s: %w", src, err)
	}
	if pin != nil && (pin.Ecosystem != src.Ecosystem || pin.Name != src.Name) {
		return nil, fmt.Errorf("installing %s: pin is for %s", src, pin)
	}
	if p, err := in.fromStore(src, pin); p != nil || err != nil {
		return p, err
	}
	switch src.Ecosystem {
	case NPM:
		return in.installNPM(ctx, src, pin, nil)
	case PyPI:
		return in.installPyPI(ctx, src, pin)
	}
	return nil, fmt.Errorf("installing %s: ecosystem %s is not supported yet", src, src.Ecosystem)
}

// InstallLocked installs a pinned npm package with exactly the
// dependencies of lockfile, a package-lock.json this package made before
// (Package.Lockfile), e.g. on another machine or after the store was
// cleared: the pin alone would re-resolve the dependencies, and refuse if
// any changed since. The lockfile must hash to pin.Lockfile. Without
// network when the store has the pin's entry.
func (in *Installer) InstallLocked(ctx context.Context, pin Pin, lockfile []byte) (*Package, error) {
	src := pin.Source()
	if err := src.check(); err != nil {
		return nil, fmt.Errorf("installing %s: %w", src, err)
	}
	if pin.Ecosystem != NPM {
		return nil, fmt.Errorf("installing %s from a lockfile: only npm is supported", pin)
	}
	if got := sri(lockfile); pin.Lockfile == "" || got != pin.Lockfile {
		return nil, fmt.Errorf("installing %s: %w: it hashes to %s, pinned %q", pin, ErrLockfileMismatch, got, pin.Lockfile)
	}
	if p, err := in.fromStore(src, &pin); p != nil || err != nil {
		return p, err
	}
	return in.installNPM(ctx, src, &pin, lockfile)
}

// Lockfile is the installed tree's lockfile (package-lock.json for npm,
// requirements.lock for PyPI), whose hash is Pin.Lockfile: what the caller
// keeps to reinstall exactly this tree with InstallLocked.
func (p *Package) Lockfile() ([]byte, error) {
	name := "package-lock.json"
	if p.Pin.Ecosystem == PyPI {
		name = "requirements.lock"
	}
	return os.ReadFile(filepath.Join(p.Dir, name))
}

// fromStore finds src in the store without network: by its pin, or by
// its exact version. (nil, nil) means it is not there.
func (in *Installer) fromStore(src Source, pin *Pin) (*Package, error) {
	var dir string
	var m *manifest
	var err error
	switch {
	case pin != nil:
		if dir, err = entryDir(in.Store, *pin); err != nil {
			return nil, err
		}
		if m, err = readEntry(dir); err != nil || m == nil {
			return nil, err
		}
		if pin.Lockfile != "" && m.Pin.Lockfile != pin.Lockfile {
			return nil, fmt.Errorf("installing %s: the store's lockfile %s differs from the pinned %s", pin, m.Pin.Lockfile, pin.Lockfile)
		}
	case exactVersion(src.Version):
		if dir, m, err = findVersion(in.Store, src.Ecosystem, src.Name, src.Version); err != nil || m == nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	if err := checkLockfileHash(dir, m.Pin); err != nil {
		return nil, fmt.Errorf("installing %s: store entry %s: %w", src, dir, err)
	}
	bin, err := chooseBin(src, m.Bins)
	if err != nil {
		return nil, err
	}
	return &Package{Pin: m.Pin, Dir: dir, Bins: m.Bins, Bin: bin, FromStore: true}, nil
}

// responseWait bounds the wait for each response of a registry or index
// to begin (not for its body: a large tarball may take minutes): one that
// accepts the connection and never answers fails the install within it,
// instead of holding it, and serve's start, for the client's 5 minutes.
// A variable for the tests.
var responseWait = 60 * time.Second

// stallNotice is how long a response may take to begin before the
// install says it is still waiting, so that a stalled registry is not a
// minute of silence. A variable for the tests.
var stallNotice = 10 * time.Second

func (in *Installer) registry() *registry {
	c := in.Client
	if c == nil {
		t := in.hostFetch().Transport()
		t.ResponseHeaderTimeout = responseWait
		c = &http.Client{Timeout: 5 * time.Minute, Transport: stallNoticer{next: t, in: in}}
	}
	return &registry{cfg: in.NPM, client: c}
}

// stallNoticer says when a registry's response has not begun within
// stallNotice.
type stallNoticer struct {
	next http.RoundTripper
	in   *Installer
}

func (s stallNoticer) RoundTrip(req *http.Request) (*http.Response, error) {
	// The host only: a registry's URL may carry credentials.
	t := time.AfterFunc(stallNotice, func() {
		s.in.progress("no answer yet from %s after %s (mcpbox gives up after %s)", req.URL.Host, stallNotice, responseWait)
	})
	defer t.Stop()
	return s.next.RoundTrip(req)
}

// hostFetch guards the host's own fetches: only the registries and
// indexes the user's configuration names may be at a non-public address.
func (in *Installer) hostFetch() *egress.HostFetch {
	var trusted []string
	for _, u := range in.NPM.registries() {
		trusted = append(trusted, egress.URLHostPort(u))
	}
	if idx, err := in.PyPI.index(); err == nil {
		trusted = append(trusted, egress.URLHostPort(idx))
	}
	for _, h := range in.PyPI.FileHosts {
		trusted = append(trusted, egress.URLHostPort(&url.URL{Scheme: "https", Host: h}))
	}
	return &egress.HostFetch{Trusted: trusted}
}

func (in *Installer) checked() {
	if in.Checked != nil {
		in.Checked()
	}
}

func (in *Installer) progress(format string, args ...any) {
	if in.Progress != nil {
		in.Progress(fmt.Sprintf(format, args...))
	}
}

func (in *Installer) limits() sandbox.Limits {
	l := in.Limits
	if l.Timeout == 0 {
		l.Timeout = 10 * time.Minute
	}
	if l.TmpSize == 0 {
		l.TmpSize = 1 << 30
	}
	return l
}

// errNoBin is a package without an executable to run.
var errNoBin = errors.New("declares no bin")
