//go:build linux || darwin

package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// hostRoot resolves trusted (its own symlinks followed: the caller
// vouches for it) to an absolute real path and cleans rel, which must
// stay beneath it ("" for trusted itself).
func hostRoot(trusted, rel string) (root, clean string, err error) {
	if root, err = filepath.EvalSymlinks(trusted); err != nil {
		return "", "", err
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", "", err
	}
	clean = filepath.Clean(rel)
	if clean == "." {
		clean = ""
	}
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", "", fmt.Errorf("%s is not beneath %s: %w", clean, root, ErrUnsafeEntry)
	}
	return root, clean, nil
}

// hostPathNoFollow is hostPath without openat2 (macOS's HostPath and
// MakeHostDir): rel is walked one component at a time, each directory
// opened with openat(O_NOFOLLOW|O_DIRECTORY) beneath the one before, so a
// symlink anywhere in rel fails (ELOOP) as RESOLVE_NO_SYMLINKS does; rel
// holds no ".." (hostRoot) and each name is one component, so nothing
// resolves outside trusted. A last component that need not be a directory
// is not opened (a FIFO or a device must not be) but looked at with
// fstatat(AT_SYMLINK_NOFOLLOW) beneath its directory's descriptor, and
// refused if a symlink. It refuses all hostPath refuses, and also a
// directory on the way that this user may not read (O_PATH needs no
// permission; plain openat does). On Linux the tests hold it to hostPath's
// cases (hostpath_test.go).
func hostPathNoFollow(trusted, rel string, create bool, perm os.FileMode) (string, error) {
	root, rel, err := hostRoot(trusted, rel)
	if err != nil {
		return "", err
	}
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	fd, err := unix.Open(root, dirFlags, 0)
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
		if last && !create {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return "", noFollowError(fd, filepath.Join(at, c), c, err)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return "", noFollowError(fd, filepath.Join(at, c), c, unix.ELOOP)
			}
			return filepath.Join(at, c), nil
		}
		next, err := unix.Openat(fd, c, dirFlags, 0)
		if err != nil {
			return "", noFollowError(fd, filepath.Join(at, c), c, err)
		}
		unix.Close(fd)
		fd, at = next, filepath.Join(at, c)
	}
	return at, nil
}

// noFollowError names what hostPathNoFollow refused: a symlink with its
// target (O_NOFOLLOW's ELOOP; macOS may say ENOTDIR for a symlink opened
// with O_DIRECTORY, so the entry itself decides).
func noFollowError(dirfd int, path, name string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		buf := make([]byte, 4096)
		if n, rerr := unix.Readlinkat(dirfd, name, buf); rerr == nil {
			return fmt.Errorf("%s is a symlink to %s: %w", path, string(buf[:n]), ErrSymlink)
		}
	}
	if errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s is not a directory", path)
	}
	return &os.PathError{Op: "open", Path: path, Err: err}
}
