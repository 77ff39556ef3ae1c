//go:build linux

package workspace

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Snapshot writes to w a gzip-compressed tar of parts (part name → host
// directory, e.g. "output" and "overlay"), led by the metadata entry
// MetaName. Each part is stored under "NAME/": regular files, directories
// and symlinks (as links); overlay whiteouts and opaque directories carry
// the PAX records MCPBOX.whiteout and MCPBOX.opaque (see the package
// doc); sockets, FIFOs and other devices are left out. A file with
// several names in the part is stored once and linked; one with a name
// outside the part fails with ErrHardLink. Ownership and times other than
// mtime (seconds) are not stored, so the same tree and Meta give the same
// bytes. Trees Restore would refuse fail with ErrLimit.
//
// Preconditions: the sandbox writing the parts is stopped or frozen; a
// file that shrinks while it is read fails the snapshot.
func Snapshot(w io.Writer, meta Meta, parts map[string]string) error {
	names := slices.Sorted(maps.Keys(parts))
	for _, name := range names {
		if name == "" || name == "." || name == ".." || name == MetaName || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("snapshot part %q: %w", name, ErrUnsafeEntry)
		}
	}
	if meta.Version == 0 {
		meta.Version = SnapshotVersion
	}
	meta.Parts = names
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	s := &snapshotter{tw: tw, lim: restoreLimits}
	if err := s.writeMeta(meta); err != nil {
		return err
	}
	for _, name := range names {
		if err := s.part(name, parts[name]); err != nil {
			return fmt.Errorf("snapshotting %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing snapshot: %w", err)
	}
	return nil
}

type inode struct{ dev, ino uint64 }

type snapshotter struct {
	tw      *tar.Writer
	lim     limits
	entries int
	bytes   int64
	links   map[inode]*linked // files of the current part with nlink > 1
}

type linked struct {
	first string // entry name of the first name seen
	seen  uint64
	nlink uint64
}

func (s *snapshotter) writeMeta(meta Meta) error {
	body, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encoding snapshot meta: %w", err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: MetaName, Mode: 0o644, Size: int64(len(body)), ModTime: meta.Created.Truncate(time.Second), Format: tar.FormatPAX}
	if err := s.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing snapshot meta: %w", err)
	}
	_, err = s.tw.Write(body)
	return err
}

func (s *snapshotter) part(name, dir string) error {
	fd, err := openRoot(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	s.links = map[inode]*linked{}
	if err := s.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(st.Mode & 0o1777)}); err != nil {
		return err
	}
	err = walk(fd, "", 0, func(n *node) error { return s.node(name+"/"+n.rel, n) })
	if err != nil {
		return err
	}
	for _, l := range s.links {
		if l.seen < l.nlink {
			return fmt.Errorf("%q: %w", l.first, ErrHardLink)
		}
	}
	return nil
}

// header writes hdr with the fields that would make output depend on
// the host cleared, counting it against the limits.
func (s *snapshotter) header(hdr *tar.Header) error {
	s.entries++
	if s.entries > s.lim.entries || hdr.Size > s.lim.bytes-s.bytes {
		return fmt.Errorf("snapshot over %d entries or %d bytes: %w", s.lim.entries, s.lim.bytes, ErrLimit)
	}
	s.bytes += hdr.Size
	hdr.Format = tar.FormatPAX
	hdr.ModTime = hdr.ModTime.Truncate(time.Second)
	if err := s.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing %q: %w", hdr.Name, err)
	}
	return nil
}

func (s *snapshotter) node(name string, n *node) error {
	hdr := &tar.Header{Name: name, Mode: int64(n.st.Mode & 0o1777), ModTime: time.Unix(n.st.Mtim.Unix())}
	switch n.typ() {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		if x := opaqueMark(n.fd); x != "" {
			hdr.PAXRecords = map[string]string{paxOpaque: x}
		}
	case unix.S_IFLNK:
		target, err := readlinkAt(n.dir, n.name)
		if err != nil {
			return fmt.Errorf("reading link %q: %w", n.rel, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case unix.S_IFCHR:
		if n.st.Rdev != 0 {
			return nil
		}
		hdr.Typeflag, hdr.Mode, hdr.ModTime = tar.TypeReg, 0, time.Unix(0, 0)
		hdr.PAXRecords = map[string]string{paxWhiteout: "1"}
	case unix.S_IFREG:
		return s.file(hdr, n)
	default:
		return nil
	}
	return s.header(hdr)
}

func (s *snapshotter) file(hdr *tar.Header, n *node) error {
	if n.st.Nlink > 1 {
		key := inode{uint64(n.st.Dev), n.st.Ino}
		if l := s.links[key]; l != nil {
			l.seen++
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, l.first
			return s.header(hdr)
		}
		s.links[key] = &linked{first: hdr.Name, seen: 1, nlink: uint64(n.st.Nlink)}
	}
	f, _, err := openFileAt(n.dir, n.name, &n.st)
	if err != nil {
		return fmt.Errorf("opening %q: %w", n.rel, err)
	}
	defer f.Close()
	hdr.Typeflag, hdr.Size = tar.TypeReg, n.st.Size
	if err := s.header(hdr); err != nil {
		return err
	}
	if _, err := io.CopyN(s.tw, f, hdr.Size); err != nil {
		return fmt.Errorf("copying %q: %w", n.rel, err)
	}
	return nil
}

// opaqueMark returns the name of the overlay xattr marking the directory
// fd opaque, or "".
func opaqueMark(fd int) string {
	buf := make([]byte, 8)
	for _, name := range opaqueXattrs {
		if n, err := unix.Fgetxattr(fd, name, buf); err == nil && string(buf[:n]) == "y" {
			return name
		}
	}
	return ""
}

// openSnapshot opens a snapshot and reads its metadata, leaving the tar
// reader at the first part entry.
func openSnapshot(path string) (*tar.Reader, Meta, func(), error) {
	var meta Meta
	f, err := os.Open(path)
	if err != nil {
		return nil, meta, nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, meta, nil, fmt.Errorf("%s: %w: %w", path, ErrSnapshot, err)
	}
	done := func() { zr.Close(); f.Close() }
	tr := tar.NewReader(zr)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != MetaName || hdr.Typeflag != tar.TypeReg || hdr.Size > maxMetaSize {
		done()
		return nil, meta, nil, fmt.Errorf("%s: no metadata: %w", path, ErrSnapshot)
	}
	if err := json.NewDecoder(io.LimitReader(tr, maxMetaSize)).Decode(&meta); err != nil {
		done()
		return nil, meta, nil, fmt.Errorf("%s: decoding metadata: %w: %w", path, ErrSnapshot, err)
	}
	if meta.Version < 1 || meta.Version > SnapshotVersion {
		done()
		return nil, meta, nil, fmt.Errorf("%s: version %d: %w", path, meta.Version, ErrSnapshot)
	}
	return tr, meta, done, nil
}

// ReadMeta reads only the metadata of the snapshot at path.
func ReadMeta(path string) (Meta, error) {
	_, meta, done, err := openSnapshot(path)
	if err != nil {
		return Meta{}, fmt.Errorf("reading snapshot meta: %w", err)
	}
	done()
	return meta, nil
}

// Restore extracts part of the snapshot at path into the empty directory
// dst (made 0700 if missing), with Seed's confinement plus the overlay
// marks Snapshot records. On error dst may hold a partial tree.
func Restore(path, part, dst string) error {
	tr, meta, done, err := openSnapshot(path)
	if err != nil {
		return fmt.Errorf("restoring: %w", err)
	}
	defer done()
	if !slices.Contains(meta.Parts, part) || part == "" || strings.Contains(part, "/") {
		return fmt.Errorf("restoring %q from %s: %w", part, path, ErrNoPart)
	}
	if err := ensureEmptyDir(dst); err != nil {
		return fmt.Errorf("restoring: %w", err)
	}
	root, err := openRoot(dst)
	if err != nil {
		return fmt.Errorf("restoring: %w", err)
	}
	defer unix.Close(root)
	if err := newWriter(root, restoreLimits).extract(tr, part); err != nil {
		return fmt.Errorf("restoring %q from %s into %s: %w", part, path, dst, err)
	}
	return nil
}
