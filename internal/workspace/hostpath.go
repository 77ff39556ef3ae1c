//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// HostPath returns the real path of rel beneath trusted without following
// a symlink in rel: trusted is a directory the caller vouches for (its own
// symlinks are followed), rel is a name a project chose, and a project's
// symlink must not choose which host file a sandbox sees. A symlink fails
// with ErrSymlink, naming the link and its target.
func HostPath(trusted, rel string) (string, error) {
	return hostPath(trusted, rel, false, 0)
}

// MakeHostDir is HostPath for a directory that mcpbox writes to: missing
// components are made with perm, and every component, the last too, must
// be a directory.
func MakeHostDir(trusted, rel string, perm os.FileMode) (string, error) {
	return hostPath(trusted, rel, true, perm)
}

func hostPath(trusted, rel string, create bool, perm os.FileMode) (string, error) {
	root, rel, err := hostRoot(trusted, rel)
	if err != nil {
		return "", err
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer func() { unix.Close(fd) }()
	if rel == "" {
		return root, nil
	}
	at := root
	comps := strings.Split(rel, "/")
	for i, c := range comps {
		last := i == len(comps)-1
		if create {
			if err := unix.Mkdirat(fd, c, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
				return "", &os.PathError{Op: "mkdir", Path: filepath.Join(at, c), Err: err}
			}
		}
		next, err := openComponent(fd, c, create || !last)
		if err != nil {
			return "", componentError(fd, filepath.Join(at, c), c, err)
		}
		unix.Close(fd)
		fd, at = next, filepath.Join(at, c)
	}
	return at, nil
}

// openComponent opens name, one component, beneath dirfd as an O_PATH fd,
// failing with ELOOP if it is a symlink; with dir it must be a directory.
func openComponent(dirfd int, name string, dir bool) (int, error) {
	flags := uint64(unix.O_PATH | unix.O_CLOEXEC)
	if dir {
		flags |= unix.O_DIRECTORY
	}
	return unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// componentError names what was refused: a symlink with its target.
func componentError(dirfd int, path, name string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		if target, rerr := readlinkAt(dirfd, name); rerr == nil {
			return fmt.Errorf("%s is a symlink to %s: %w", path, target, ErrSymlink)
		}
	}
	if errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s is not a directory", path)
	}
	return &os.PathError{Op: "open", Path: path, Err: err}
}
