//go:build linux

package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// limits bound what one Seed or Restore writes.
type limits struct {
	entries int   // entries read, including ones skipped
	bytes   int64 // total declared size of file contents
}

// Tests lower these to build bombs cheaply.
var (
	templateLimits = limits{entries: 100_000, bytes: 4 << 30}
	restoreLimits  = limits{entries: 1_000_000, bytes: 64 << 30}
)

const (
	paxWhiteout = "MCPBOX.whiteout"
	paxOpaque   = "MCPBOX.opaque"
)

// opaqueXattrs are the xattrs overlayfs reads an opaque mark from: the
// first for a mount by root, the second for "userxattr" mounts.
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

// writer creates entries beneath root and nowhere else.
type writer struct {
	root     int
	lim      limits
	entries  int
	bytes    int64
	dirModes map[string]uint32 // applied last, so a 0555 dir can be filled
}

func newWriter(root int, lim limits) *writer {
	return &writer{root: root, lim: lim, dirModes: map[string]uint32{}}
}

// count charges one entry of size bytes against the limits.
func (x *writer) count(size int64) error {
	x.entries++
	if x.entries > x.lim.entries {
		return fmt.Errorf("more than %d entries: %w", x.lim.entries, ErrLimit)
	}
	if size < 0 || size > x.lim.bytes-x.bytes {
		return fmt.Errorf("more than %d bytes: %w", x.lim.bytes, ErrLimit)
	}
	x.bytes += size
	return nil
}

// cleanName checks a tar entry name and returns it as a relative slash
// path ("" for the root). Anything absolute, with "..", "." or empty
// components inside, or too deep is refused rather than cleaned.
func cleanName(name string) (string, error) {
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." {
		return "", nil
	}
	if strings.HasPrefix(name, "/") || strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("entry %q: %w", name, ErrUnsafeEntry)
	}
	parts := strings.Split(name, "/")
	if len(parts) > maxDepth {
		return "", fmt.Errorf("entry %q is %d levels deep: %w", name, len(parts), ErrLimit)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", fmt.Errorf("entry %q: %w", name, ErrUnsafeEntry)
		}
	}
	return name, nil
}

// exists marks a name clash as unsafe: an archive that names one path
// twice may be trying to replace what it made first (a symlink, say).
func exists(err error) error {
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("duplicate entry: %w: %w", ErrUnsafeEntry, err)
	}
	return err
}

func perm(mode int64) uint32 { return uint32(mode) & 0o1777 }

// parent opens (making as needed) the parent directory of rel.
func (x *writer) parent(rel string) (int, string, error) {
	dir, base := splitRel(rel)
	fd, err := openDirBeneath(x.root, dir, true, 0o755)
	return fd, base, err
}

func (x *writer) dir(rel string, mode uint32, opaque string) error {
	if rel == "" {
		return nil // the destination's own mode is the caller's
	}
	fd, err := openDirBeneath(x.root, rel, true, 0o700)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	x.dirModes[rel] = mode
	if opaque == "" {
		return nil
	}
	if !slices.Contains(opaqueXattrs, opaque) {
		return fmt.Errorf("opaque mark %q on %q: %w", opaque, rel, ErrUnsafeEntry)
	}
	if err := unix.Fsetxattr(fd, opaque, []byte("y"), 0); err != nil {
		return fmt.Errorf("marking %q opaque: %w", rel, err)
	}
	return nil
}

func (x *writer) file(rel string, mode uint32, mtime time.Time, r io.Reader, size int64) error {
	pfd, base, err := x.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("creating %q: %w", rel, exists(err))
	}
	f := os.NewFile(uintptr(fd), rel)
	n, err := copySparse(f, io.LimitReader(r, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = unix.Fchmod(fd, mode)
	}
	if err == nil && !mtime.IsZero() {
		tv := unix.NsecToTimeval(mtime.UnixNano())
		err = unix.Futimes(fd, []unix.Timeval{tv, tv})
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q: %w", rel, err)
	}
	return nil
}

// sparseBlock is the unit copySparse leaves a hole for when it is all
// zeros: a file system's block, or a multiple of it.
const sparseBlock = 64 << 10

// copySparse copies r to f, the start of a new file, leaving holes where
// a whole block is zeros, and returns the bytes copied: a workspace's
// sparse file (a 512 MiB file that takes 4 KiB, within the output's
// size, which counts blocks) is restored taking as little, not written
// out in full.
func copySparse(f *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, sparseBlock)
	var n int64
	hole := false // the file ends in a hole so far
	for {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if isZeros(buf[:m]) {
				if _, serr := f.Seek(int64(m), io.SeekCurrent); serr != nil {
					return n, serr
				}
				hole = true
			} else {
				if _, werr := f.Write(buf[:m]); werr != nil {
					return n, werr
				}
				hole = false
			}
			n += int64(m)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return n, err
		}
	}
	if hole {
		// A seek past the end makes no bytes: the size must.
		if err := f.Truncate(n); err != nil {
			return n, err
		}
	}
	return n, nil
}

// zeroBlock is sparseBlock zero bytes, which a block is compared with.
var zeroBlock = make([]byte, sparseBlock)

// isZeros reports whether b, at most sparseBlock long, holds only zeros.
func isZeros(b []byte) bool { return bytes.Equal(b, zeroBlock[:len(b)]) }

func (x *writer) symlink(rel, target string) error {
	if target == "" || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("symlink %q: %w", rel, ErrUnsafeEntry)
	}
	pfd, base, err := x.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Symlinkat(target, pfd, base); err != nil {
		return fmt.Errorf("making symlink %q: %w", rel, exists(err))
	}
	return nil
}

// link makes rel a hard link to the regular file target, an entry
// already written beneath the root.
func (x *writer) link(rel, linkname string) error {
	target, err := cleanName(linkname)
	if err != nil || target == "" {
		return fmt.Errorf("hard link %q to %q: %w", rel, linkname, ErrUnsafeEntry)
	}
	tdir, tbase := splitRel(target)
	ofd, err := openDirBeneath(x.root, tdir, false, 0)
	if err != nil {
		return fmt.Errorf("hard link %q: %w", rel, err)
	}
	defer unix.Close(ofd)
	var st unix.Stat_t
	if err := unix.Fstatat(ofd, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("hard link %q to %q (not an extracted file): %w", rel, target, ErrUnsafeEntry)
	}
	pfd, base, err := x.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Linkat(ofd, tbase, pfd, base, 0); err != nil {
		return fmt.Errorf("linking %q: %w", rel, exists(err))
	}
	return nil
}

func (x *writer) whiteout(rel string) error {
	pfd, base, err := x.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Mknodat(pfd, base, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("making whiteout %q: %w", rel, exists(err))
	}
	return nil
}

// finish applies the recorded directory modes, deepest first.
func (x *writer) finish() error {
	rels := make([]string, 0, len(x.dirModes))
	for rel := range x.dirModes {
		rels = append(rels, rel)
	}
	slices.SortFunc(rels, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, rel := range rels {
		fd, err := openDirBeneath(x.root, rel, false, 0)
		if err != nil {
			return err
		}
		err = unix.Fchmod(fd, x.dirModes[rel])
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("setting mode of %q: %w", rel, err)
		}
	}
	return nil
}

// extract writes the entries of tr beneath x's root. With prefix, only
// entries under prefix+"/" are written (the prefix stripped), and
// whiteout and opaque marks are honoured; without, a marked entry is
// refused.
func (x *writer) extract(tr *tar.Reader, prefix string) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return x.finish()
		}
		if err != nil {
			return fmt.Errorf("reading archive: %w", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := x.count(hdr.Size); err != nil {
			return err
		}
		name := hdr.Name
		if prefix != "" {
			rest, ok := strings.CutPrefix(name, prefix+"/")
			if !ok {
				continue
			}
			name = rest
		}
		if err := x.entry(hdr, name, tr, prefix); err != nil {
			return err
		}
	}
}

// entry writes one archive entry as name; a prefix (Restore's part) also
// qualifies hard link targets and allows overlay marks.
func (x *writer) entry(hdr *tar.Header, name string, r io.Reader, prefix string) error {
	marks := prefix != ""
	rel, err := cleanName(name)
	if err != nil {
		return err
	}
	whiteout, opaque := hdr.PAXRecords[paxWhiteout] != "", hdr.PAXRecords[paxOpaque]
	if !marks && (whiteout || opaque != "") {
		return fmt.Errorf("overlay mark on %q: %w", name, ErrUnsafeEntry)
	}
	if rel == "" && hdr.Typeflag != tar.TypeDir {
		return fmt.Errorf("entry %q: %w", hdr.Name, ErrUnsafeEntry)
	}
	switch {
	case hdr.Typeflag == tar.TypeDir:
		return x.dir(rel, perm(hdr.Mode), opaque)
	case hdr.Typeflag == tar.TypeReg && whiteout:
		return x.whiteout(rel)
	case hdr.Typeflag == tar.TypeReg:
		return x.file(rel, perm(hdr.Mode), hdr.ModTime, r, hdr.Size)
	case hdr.Typeflag == tar.TypeSymlink:
		return x.symlink(rel, hdr.Linkname)
	case hdr.Typeflag == tar.TypeLink:
		target, ok := strings.CutPrefix(hdr.Linkname, prefix+"/")
		if !ok && marks {
			return fmt.Errorf("hard link %q to %q outside the part: %w", rel, hdr.Linkname, ErrUnsafeEntry)
		}
		if !marks {
			target = hdr.Linkname
		}
		return x.link(rel, target)
	}
	return fmt.Errorf("entry %q of type %q: %w", hdr.Name, hdr.Typeflag, ErrUnsafeEntry)
}
