package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"mcpbox/internal/integrity"
	"mcpbox/internal/pkginstall"
)

// The dependency lockfile of a pinned npm package is kept beside the lock
// file, in mcpbox.lock.d/SERVER.package-lock.json, so that a start whose
// store lacks the package (another machine, a cleared state dir)
// reinstalls exactly the pinned dependencies (npm ci) instead of
// re-resolving them, which a dependency's new release would make fail.
// Its hash is the pin's Lockfile; a file that does not match is refused.

// lockfilePath is where server's npm lockfile is kept.
func lockfilePath(lockPath, server string) string {
	return filepath.Join(lockPath+".d", server+".package-lock.json")
}

// writeLockfile keeps pkg's lockfile for server (npm only), atomically.
func writeLockfile(lockPath, server string, pkg *pkginstall.Package) error {
	if pkg.Pin.Ecosystem != pkginstall.NPM {
		return nil
	}
	data, err := pkg.Lockfile()
	if err != nil {
		return fmt.Errorf("server %s: reading the installed lockfile: %w", server, err)
	}
	dir := filepath.Dir(lockfilePath(lockPath, server))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("server %s: keeping the lockfile: %w", server, err)
	}
	// The project's, which a hostile repository may have made a symlink
	// to a place of the user's.
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("server %s: keeping the lockfile: %s is not a directory (a symlink?)", server, dir)
	}
	tmp, err := os.CreateTemp(dir, ".tmp*")
	if err != nil {
		return fmt.Errorf("server %s: keeping the lockfile: %w", server, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), lockfilePath(lockPath, server))
	}
	if err != nil {
		return fmt.Errorf("server %s: keeping the lockfile: %w", server, err)
	}
	return nil
}

// installPinned installs a pinned package: with its kept npm lockfile
// when there is one (exactly those dependencies), else by the pin alone.
func installPinned(ctx context.Context, in *pkginstall.Installer, lockPath, server string, src pkginstall.Source, pin pkginstall.Pin) (*pkginstall.Package, error) {
	if lockPath != "" && pin.Ecosystem == pkginstall.NPM && pin.Lockfile != "" && src.Bin == "" {
		data, err := readKeptLockfile(lockfilePath(lockPath, server))
		switch {
		case err == nil:
			return in.InstallLocked(ctx, pin, data)
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("reading the kept lockfile: %w", err)
		}
	}
	return in.Install(ctx, src, &pin)
}

// readKeptLockfile reads a kept lockfile of the project's: a regular file
// in a real directory, not a link a cloned repository planted to a file
// of the user's, whose hash the mismatch error would then print.
func readKeptLockfile(path string) ([]byte, error) {
	if fi, err := os.Lstat(filepath.Dir(path)); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (a symlink?)", filepath.Dir(path))
	}
	f, err := integrity.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxKeptLockfile))
}

// maxKeptLockfile bounds a kept lockfile: a large project's npm lockfile
// is a few MiB.
const maxKeptLockfile = 64 << 20

// keepPin writes a package pin and, for npm, its lockfile.
func keepPin(lockPath, server string, pin integrity.PackagePin, pkg *pkginstall.Package) error {
	if err := writeLockfile(lockPath, server, pkg); err != nil {
		return err
	}
	return integrity.WritePackagePin(lockPath, server, pin)
}
