//go:build linux

package workspace

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Seed fills the empty directory dst (made 0700 if missing) from
// template: a directory, whose regular files, directories and symlinks
// are copied (symlinks as symlinks, never followed; other types skipped),
// or a tar archive (.tar, .tar.gz, .tgz) whose entries are confined
// beneath dst. Hard links in an archive may only name files it already
// extracted; absolute names, "..", devices, FIFOs and overlay marks fail
// with ErrUnsafeEntry. Modes keep permission and sticky bits, never
// setuid or setgid. Size and entry count are bounded (ErrLimit). On error
// dst may hold a partial copy; the caller removes it.
func Seed(dst, template string) error {
	// The real path its setup checked: a link there now, as the
	// template or as a dir on its way, was made since, by a sandbox that
	// can write beside it, to show what it points to. Opened once, without
	// following one, and copied from that descriptor.
	fd, err := unix.Openat2(unix.AT_FDCWD, template, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("seeding from template: %s is now reached through a symlink: %w", template, ErrTemplate)
	}
	if err != nil {
		return fmt.Errorf("seeding from template: %w", &os.PathError{Op: "open", Path: template, Err: err})
	}
	f := os.NewFile(uintptr(fd), template)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("seeding from template: %w", err)
	}
	if err := ensureEmptyDir(dst); err != nil {
		return fmt.Errorf("seeding %s: %w", dst, err)
	}
	root, err := openRoot(dst)
	if err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	defer unix.Close(root)
	x := newWriter(root, templateLimits)
	switch {
	case st.IsDir():
		err = x.copyTree(f)
	case st.Mode().IsRegular() && isTarName(template):
		err = x.extractFile(f, "")
	default:
		err = fmt.Errorf("%s: %w", template, ErrTemplate)
	}
	if err != nil {
		return fmt.Errorf("seeding %s from %s: %w", dst, template, err)
	}
	return nil
}

func isTarName(name string) bool {
	for _, suf := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

func isGzipName(name string) bool {
	return strings.HasSuffix(name, ".gz") || strings.HasSuffix(name, ".tgz")
}

// extractFile extracts the open tar f (gzip-compressed by its name).
func (x *writer) extractFile(f *os.File, prefix string) error {
	var r io.Reader = f
	if isGzipName(f.Name()) {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f.Name(), err)
		}
		defer zr.Close()
		r = zr
	}
	return x.extract(tar.NewReader(r), prefix)
}

// copyTree copies the open directory src into x's root.
func (x *writer) copyTree(src *os.File) error {
	err := walk(int(src.Fd()), "", 0, func(n *node) error {
		size := int64(0)
		if n.typ() == unix.S_IFREG {
			size = n.st.Size
		}
		if err := x.count(size); err != nil {
			return err
		}
		return x.copyNode(n)
	})
	if err != nil {
		return err
	}
	return x.finish()
}

func (x *writer) copyNode(n *node) error {
	mode := n.st.Mode & 0o1777
	switch n.typ() {
	case unix.S_IFDIR:
		return x.dir(n.rel, mode, "")
	case unix.S_IFLNK:
		target, err := readlinkAt(n.dir, n.name)
		if err != nil {
			return fmt.Errorf("reading link %q: %w", n.rel, err)
		}
		return x.symlink(n.rel, target)
	case unix.S_IFREG:
		f, st, err := openFileAt(n.dir, n.name, &n.st)
		if err != nil {
			return fmt.Errorf("opening %q: %w", n.rel, err)
		}
		defer f.Close()
		return x.file(n.rel, mode, time.Unix(st.Mtim.Unix()), f, n.st.Size)
	}
	return nil // devices, FIFOs, sockets are not part of a template
}

// readlinkAt reads the target of the symlink name beneath dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
