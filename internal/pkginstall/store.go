package pkginstall

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// manifestName is the file an entry of the store holds next to the
// installed tree: its pin and bins. It is written before the entry is
// renamed into place, so an entry without it is not one of ours.
const manifestName = ".mcpbox-package.json"

// manifest is what the store remembers of one installed package.
type manifest struct {
	Pin  Pin               `json:"pin"`
	Bins map[string]string `json:"bins"` // bin name: path relative to the entry
}

// entryDir is the store's directory for a package version with a given
// integrity: STORE/ECOSYSTEM/NAME/VERSION/ALG-HEX (sha512 for npm, sha256 for PyPI). Name and version
// are checked to be plain path components first, since they come from a
// registry.
func entryDir(store string, p Pin) (string, error) {
	if err := checkPinPath(p); err != nil {
		return "", err
	}
	alg, d, err := parseDigest(p.Integrity)
	if err != nil {
		return "", fmt.Errorf("pin of %s@%s: %w", p.Name, p.Version, err)
	}
	return filepath.Join(store, string(p.Ecosystem), filepath.FromSlash(p.Name), p.Version, alg+"-"+hex.EncodeToString(d)), nil
}

func checkPinPath(p Pin) error {
	switch p.Ecosystem {
	case NPM:
		if err := checkNPMName(p.Name); err != nil {
			return err
		}
	case PyPI:
		if !pypiName().MatchString(p.Name) {
			return fmt.Errorf("pypi package name %q is not valid", p.Name)
		}
	default:
		return fmt.Errorf("pin of %s: unknown ecosystem %q", p.Name, p.Ecosystem)
	}
	if !exactVersion(p.Version) {
		return fmt.Errorf("pin of %s: version %q is not an exact version", p.Name, p.Version)
	}
	return nil
}

// exactVersion reports whether v is one exact version that is safe as a
// path component (semver; PyPI versions of the same shape pass too).
func exactVersion(v string) bool {
	if _, ok := parseVersion(v); ok {
		return !strings.ContainsAny(v, `/\`)
	}
	return pep440Exact().MatchString(v)
}

// readEntry reads the manifest of an installed entry; an entry that is
// not there is (nil, nil).
func readEntry(dir string) (*manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading store entry: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reading store entry %s: %w", dir, err)
	}
	return &m, nil
}

// findVersion looks for the single entry of an exact version in the store,
// whatever its integrity. More than one (the registry changed the bytes
// between two installs) is an error: the caller must say which by a pin.
func findVersion(store string, eco Ecosystem, name, version string) (string, *manifest, error) {
	// Listed, not globbed: the store's path (under a state dir that a
	// config names) may hold a pattern's metacharacters.
	vdir := filepath.Join(store, string(eco), filepath.FromSlash(name), version)
	ents, err := os.ReadDir(vdir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading the package store: %w", err)
	}
	var dirs []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "sha") && strings.Contains(e.Name(), "-") {
			dirs = append(dirs, filepath.Join(vdir, e.Name()))
		}
	}
	if len(dirs) == 0 {
		return "", nil, nil
	}
	if len(dirs) > 1 {
		return "", nil, fmt.Errorf("%s package %s@%s: the store holds %d builds with different integrity; pin one", eco, name, version, len(dirs))
	}
	m, err := readEntry(dirs[0])
	return dirs[0], m, err
}

// stagingDir makes a fresh directory under STORE/.tmp, on the store's
// file system so the finished tree can be renamed into place.
func stagingDir(store string) (string, error) {
	tmp := filepath.Join(store, ".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", fmt.Errorf("creating store staging dir: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	d := filepath.Join(tmp, hex.EncodeToString(b[:]))
	if err := os.Mkdir(d, 0o700); err != nil {
		return "", fmt.Errorf("creating store staging dir: %w", err)
	}
	return d, nil
}

// entryLockPoll is how often an install waiting for another install of
// the same entry tries its lock again.
const entryLockPoll = 100 * time.Millisecond

// lockEntry takes the install lock of the store entry dst, a flock on a
// file under STORE/.locks: gateways that start together (instances of one
// project, or of projects sharing a state dir) and want the same package
// build it once, the others waiting and then finding it in the store.
// It waits while another install, of this process or another, holds the
// lock, calling waiting once, until ctx ends; the holder's install is
// bounded by its sandboxes' timeout, and the kernel drops the lock of a
// process that dies. The lock files stay: removing one would race with a
// waiter that has it open.
func lockEntry(ctx context.Context, store, dst string, waiting func()) (unlock func(), err error) {
	dir := filepath.Join(store, ".locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the store's lock dir: %w", err)
	}
	rel, err := filepath.Rel(store, dst)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(rel))
	name := filepath.Join(dir, hex.EncodeToString(sum[:12])+".lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the store entry's lock: %w", err)
	}
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // the close releases it
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking the store entry: %w", err)
		}
		if !said {
			waiting()
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another install of the same package: %w", context.Cause(ctx))
		case <-time.After(entryLockPoll):
		}
	}
}

// claimEntry takes the install lock of the store entry dst (lockEntry)
// and then looks for it: if another install has made it meanwhile, it
// returns that entry as the Package of src (at the entry's exact version),
// checked against pin as any entry found in the store is, and holds no
// lock; else the caller builds dst and calls unlock after its commit.
func (in *Installer) claimEntry(ctx context.Context, dst string, src Source, pin *Pin) (pkg *Package, unlock func(), err error) {
	unlock, err = lockEntry(ctx, in.Store, dst, func() {
		in.progress("waiting for another install of %s@%s to end", src.Name, src.Version)
	})
	if err != nil {
		return nil, nil, err
	}
	m, err := readEntry(dst)
	if err != nil || m != nil {
		unlock()
		if err != nil {
			return nil, nil, err
		}
		// The entry found is checked against the pin itself: the pin may
		// spell the version otherwise than the registry resolved it (a
		// PyPI "1.0" for "1.0.0"), and dst is the resolved spelling's.
		if pin != nil && pin.Lockfile != "" && m.Pin.Lockfile != pin.Lockfile {
			return nil, nil, fmt.Errorf("installing %s: the store's lockfile %s differs from the pinned %s", pin, m.Pin.Lockfile, pin.Lockfile)
		}
		pkg, err := in.fromStore(src, &m.Pin)
		if pkg == nil && err == nil {
			err = fmt.Errorf("installing %s: store entry %s: its manifest names %s", src, dst, m.Pin)
		}
		return pkg, nil, err
	}
	return nil, unlock, nil
}

// commit writes the manifest into the built tree and renames it to dst.
// If another install got there first, its entry stands and built is
// dropped: both came from the same verified bytes.
func commit(built, dst string, m *manifest) (*manifest, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(built, manifestName), data); err != nil {
		return nil, fmt.Errorf("writing store entry: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, fmt.Errorf("creating store entry: %w", err)
	}
	if err := os.Rename(built, dst); err != nil {
		if other, rerr := readEntry(dst); rerr == nil && other != nil {
			return other, nil
		}
		return nil, fmt.Errorf("moving install into the store: %w", err)
	}
	return m, nil
}

// CleanStaging removes staging dirs older than age from the store: what
// installs killed with their process (a gateway crash) left behind. Younger
// ones may belong to an install still running in another process; an
// install is bounded by its sandbox's timeout, so an age above it is safe.
func (in *Installer) CleanStaging(age time.Duration) error {
	tmp := filepath.Join(in.Store, ".tmp")
	ents, err := os.ReadDir(tmp)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cleaning the package store: %w", err)
	}
	var errs []error
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < age {
			continue
		}
		if err := os.RemoveAll(filepath.Join(tmp, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning the package store: %w", err)
	}
	return nil
}

// writeNew creates a file that must not exist yet: in a tree that install
// scripts have written to, a name they planted (a symlink to a host file,
// say) refuses the install instead of being written through.
func writeNew(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
