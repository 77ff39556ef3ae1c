//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// maxDepth bounds the components of any path walked or extracted; a
	// walk holds one descriptor per level.
	maxDepth = 128
	// maxDirEntries bounds the names read from one directory.
	maxDirEntries = 1 << 20
)

const (
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	readFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
)

// openRoot opens a caller-given directory. Roots are trusted paths, so a
// symlink in them is followed.
func openRoot(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// openDirAt opens the directory name beneath dirfd; a symlink fails with
// ELOOP or ENOTDIR.
func openDirAt(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, dirFlags, 0)
}

// openFileAt opens name beneath dirfd for reading and returns it only if
// it is the regular file want (from an earlier fstatat), so a swap
// between the two calls is caught. Callers never call it for a name that
// was not a regular file, so no FIFO or device is opened; O_NONBLOCK
// keeps even a racing swap to a FIFO from blocking.
func openFileAt(dirfd int, name string, want *unix.Stat_t) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dirfd, name, readFlags, 0)
	if err != nil {
		return nil, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != want.Dev || st.Ino != want.Ino {
		unix.Close(fd)
		return nil, st, fmt.Errorf("%s changed while reading: %w", name, ErrUnsafeEntry)
	}
	return os.NewFile(uintptr(fd), name), st, nil
}

// readNames returns the sorted names in the directory dirfd.
func readNames(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", dirFlags, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	var names []string
	for {
		batch, err := f.Readdirnames(4096)
		names = append(names, batch...)
		if len(names) > maxDirEntries {
			return nil, fmt.Errorf("directory of over %d entries: %w", maxDirEntries, ErrLimit)
		}
		if err != nil || len(batch) == 0 {
			break
		}
	}
	slices.Sort(names)
	return names, nil
}

// node is one entry met by walk.
type node struct {
	rel   string // slash path relative to the walk's root
	name  string
	dir   int // descriptor of the parent directory
	fd    int // for a directory, its own descriptor; else -1
	depth int // components in rel
	st    unix.Stat_t
}

func (n *node) typ() uint32 { return n.st.Mode & unix.S_IFMT }

// errSkip returned by a walk callback for a directory skips its contents.
var errSkip = errors.New("skip directory")

// walk calls fn for every entry beneath dirfd, depth first, names sorted
// within each directory, a directory before its contents. Entries that
// vanish during the walk are passed over.
func walk(dirfd int, rel string, depth int, fn func(*node) error) error {
	names, err := readNames(dirfd)
	if err != nil {
		return fmt.Errorf("reading directory %q: %w", rel, err)
	}
	for _, name := range names {
		n := node{rel: joinRel(rel, name), name: name, dir: dirfd, fd: -1, depth: depth + 1}
		if err := unix.Fstatat(dirfd, name, &n.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("inspecting %q: %w", n.rel, err)
		}
		if err := walkNode(&n, fn); err != nil {
			return err
		}
	}
	return nil
}

func walkNode(n *node, fn func(*node) error) error {
	if n.typ() != unix.S_IFDIR {
		return fn(n)
	}
	if n.depth >= maxDepth {
		return fmt.Errorf("%q is %d levels deep: %w", n.rel, n.depth, ErrLimit)
	}
	fd, err := openDirAt(n.dir, n.name)
	if err != nil {
		return fmt.Errorf("opening directory %q: %w", n.rel, err)
	}
	defer unix.Close(fd)
	n.fd = fd
	switch err := fn(n); {
	case errors.Is(err, errSkip):
		return nil
	case err != nil:
		return err
	}
	return walk(fd, n.rel, n.depth, fn)
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// splitRel splits a cleaned relative path into its parent ("" for the
// root) and last component.
func splitRel(rel string) (string, string) {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return "", rel
}

// openDirBeneath opens the directory rel beneath root one component at a
// time without following symlinks; with create, missing components are
// made with perm.
func openDirBeneath(root int, rel string, create bool, perm uint32) (int, error) {
	fd, err := unix.Openat(root, ".", dirFlags, 0)
	if err != nil || rel == "" {
		return fd, err
	}
	for _, c := range strings.Split(rel, "/") {
		if create {
			if err := unix.Mkdirat(fd, c, perm); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("making directory %q: %w", rel, err)
			}
		}
		next, err := openDirAt(fd, c)
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, fmt.Errorf("opening directory %q: %w: %w", rel, ErrUnsafeEntry, err)
		}
		if err != nil {
			return -1, fmt.Errorf("opening directory %q: %w", rel, err)
		}
		fd = next
	}
	return fd, nil
}

// ensureEmptyDir makes dir (0700) if it is missing and fails if it holds
// anything.
func ensureEmptyDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("%s: %w", dir, ErrNotEmpty)
	}
	return nil
}
