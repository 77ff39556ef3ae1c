package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path"
	"strings"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// maxNotes bounds Image.Notes; a layer of a million fifos gets one line
// for the rest.
const maxNotes = 100

// entryOverhead is what the layers' tar streams may hold per entry
// besides the files' bytes, on average over all entries: the header and
// the padding (1 KiB at most) and room for long names and PAX records.
const entryOverhead = 4 << 10

// unpack applies layers, lowest first, to a fresh tree in the store's
// temp dir and renames it to dst once all of them applied cleanly. It
// ends with ctx.
func (p *puller) unpack(ctx context.Context, layers []descriptor, dst string) ([]string, error) {
	tmp, err := os.MkdirTemp(p.store.tmpDir(), "rootfs-")
	if err != nil {
		return nil, fmt.Errorf("creating temp root: %w", err)
	}
	defer removeTree(tmp) // a no-op once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	u, err := newUnpacker(ctx, tmp, p.limits)
	if err != nil {
		return nil, err
	}
	defer unix.Close(u.root)
	for _, l := range layers {
		if err := u.layer(p.store, l); err != nil {
			if errors.Is(err, ErrDigest) {
				// A damaged store copy: the next pull fetches it again.
				_ = os.Remove(p.store.blobPath(l.Digest))
			}
			return nil, fmt.Errorf("image %s: layer %s: %w", p.ref, l.Digest, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return nil, fmt.Errorf("image %s: installing root %s: %w", p.ref, dst, err)
	}
	if u.dropped > 0 {
		u.notes = append(u.notes, fmt.Sprintf("and %d more", u.dropped))
	}
	return u.notes, nil
}

// unpacker writes layers into one tree. Every path is resolved from the
// tree's fd with RESOLVE_IN_ROOT, so links the layers planted resolve
// inside the tree as they would in a container; the last component of a
// path is never followed (O_NOFOLLOW, O_EXCL, AT_SYMLINK_NOFOLLOW).
type unpacker struct {
	root         int // O_PATH fd of the tree
	limits       Limits
	bytes, files int64
	// stream counts the bytes decompressed from all layers: entries the
	// unpacker skips and the headers the tar reader consumes on its own
	// (a chain of long-name or PAX headers is read inside one Next) are
	// bounded by it, and it ends the unpack when ctx ends.
	stream  *streamBudget
	notes   []string
	dropped int // notes beyond maxNotes
	// inLayer holds the entries of the layer being applied, by a seeded
	// hash of their path (a layer's paths may be 4 KiB each, and half a
	// million of them): whiteouts and opaque dirs remove entries of lower
	// layers only.
	inLayer map[uint64]struct{}
	seed    maphash.Seed
	// opaqued are the dirs (device and inode) the layer being applied
	// has made opaque: a second mark in one dir has nothing left to
	// remove, and listing the dir again for each of many marks made a
	// layer of a few KiB run for hours. Listed once a layer, a dir holds
	// only what the layers added: the names listed are bounded by the
	// entries allowed.
	opaqued map[[2]uint64]bool
}

// mark notes rel as an entry of the layer being applied.
func (u *unpacker) mark(rel string) { u.inLayer[maphash.String(u.seed, rel)] = struct{}{} }

// marked reports whether the layer being applied has an entry rel.
func (u *unpacker) marked(rel string) bool {
	_, ok := u.inLayer[maphash.String(u.seed, rel)]
	return ok
}

func newUnpacker(ctx context.Context, dir string, l Limits) (*unpacker, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening temp root: %w", err)
	}
	return &unpacker{root: fd, limits: l, seed: maphash.MakeSeed(), stream: &streamBudget{ctx: ctx, max: l.Bytes + l.Files*entryOverhead}}, nil
}

// streamBudget bounds the bytes read through it, together, and ends the
// reads when ctx ends: a layer of a few KiB may decompress to many GiB
// that no entry's limit sees.
type streamBudget struct {
	ctx       context.Context
	read, max int64
}

// reader is r read within the budget.
func (b *streamBudget) reader(r io.Reader) io.Reader { return &budgetReader{r: r, b: b} }

type budgetReader struct {
	r io.Reader
	b *streamBudget
}

func (br *budgetReader) Read(p []byte) (int, error) {
	if err := br.b.ctx.Err(); err != nil {
		return 0, err
	}
	if br.b.read > br.b.max {
		return 0, fmt.Errorf("the layers decompress to more than %d bytes (the size limit and %d bytes a tar entry): %w", br.b.max, entryOverhead, ErrLimit)
	}
	n, err := br.r.Read(p)
	br.b.read += int64(n)
	return n, err
}

func (u *unpacker) note(format string, args ...any) {
	if len(u.notes) < maxNotes {
		u.notes = append(u.notes, fmt.Sprintf(format, args...))
		return
	}
	u.dropped++
}

// layer applies one stored layer blob, then checks the blob's digest
// over every byte of the file: a mismatch fails the whole tree.
func (u *unpacker) layer(st *store, l descriptor) error {
	blob, err := st.openBlob(l.Digest)
	if err != nil {
		return err
	}
	defer blob.Close()
	r, closeR, err := decompress(bufio.NewReader(blob))
	if err != nil {
		return err
	}
	defer closeR()
	u.inLayer, u.opaqued = map[uint64]struct{}{}, map[[2]uint64]bool{}
	tr := tar.NewReader(u.stream.reader(r))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if cerr := u.stream.ctx.Err(); cerr != nil {
				return cerr
			}
			if verr := blob.verify(); verr != nil {
				return verr
			}
			return fmt.Errorf("reading tar: %w", err)
		}
		if err := u.count(); err != nil {
			return err
		}
		if err := u.entry(hdr, tr); err != nil {
			if cerr := u.stream.ctx.Err(); cerr != nil {
				return cerr // not the rest of the layer hashed first
			}
			if verr := blob.verify(); verr != nil {
				return verr
			}
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	return blob.verify()
}

func (u *unpacker) count() error {
	u.files++
	if u.files > u.limits.Files {
		return fmt.Errorf("more than %d entries: %w", u.limits.Files, ErrLimit)
	}
	return nil
}

// decompress picks the layer's compression by its first bytes (gzip,
// zstd, or none), as container runtimes do.
func decompress(br *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("reading gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case len(magic) == 4 && string(magic) == "\x28\xb5\x2f\xfd":
		zr, err := zstd.NewReader(br, zstd.WithDecoderMaxMemory(256<<20), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("reading zstd: %w", err)
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		u.note("skipped /%s: device nodes and fifos are not unpacked", rel)
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
	default:
		// Skipped, but the tar reader reads its data all the same: it
		// counts as a file's would.
		if u.bytes+hdr.Size > u.limits.Bytes {
			return fmt.Errorf("image unpacks to more than %d bytes (an entry of unsupported type %q declares %d): %w", u.limits.Bytes, hdr.Typeflag, hdr.Size, ErrLimit)
		}
		u.bytes += max(hdr.Size, 0)
		u.note("skipped /%s: unsupported entry type %q", rel, hdr.Typeflag)
		return nil
	}
	if rel == "." {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("an entry replaces the root itself: %w", ErrHostile)
		}
		return nil
	}
	dir, base := path.Dir(rel), path.Base(rel)
	if strings.HasPrefix(base, ".wh.") {
		return u.whiteout(dir, base)
	}
	parent, err := u.mkdirAll(dir)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	u.mark(rel)
	if hdr.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 && hdr.Typeflag != tar.TypeDir {
		u.note("cleared the setuid/setgid bits of /%s", rel)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.mkdir(parent, base, uint32(hdr.Mode))
	case tar.TypeReg:
		if err := u.file(parent, base, hdr, r); err != nil {
			return err
		}
		return setMtime(parent, base, hdr)
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
			return fmt.Errorf("symlink with an empty or NUL target: %w", ErrHostile)
		}
		if err := removeAt(parent, base); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return err
		}
		return setMtime(parent, base, hdr)
	default:
		return u.hardlink(parent, base, rel, hdr.Linkname)
	}
}

// setMtime gives the entry base (just made, not followed) the layer's
// modification time: Python, for one, checks its .pyc files against
// their sources' times. Directories keep the time of unpacking, since
// every later entry in them would change it again.
func setMtime(parent int, base string, hdr *tar.Header) error {
	if hdr.ModTime.IsZero() {
		return nil
	}
	ts := unix.NsecToTimespec(hdr.ModTime.UnixNano())
	return unix.UtimesNanoAt(parent, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// openDir opens rel (a directory) with every link resolved inside the tree.
func (u *unpacker) openDir(rel string) (int, error) {
	for {
		fd, err := unix.Openat2(u.root, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// mkdirAll opens rel as a directory, creating what is missing of it.
func (u *unpacker) mkdirAll(rel string) (int, error) {
	fd, err := u.openDir(rel)
	if err == nil || !errors.Is(err, unix.ENOENT) || rel == "." {
		if err != nil {
			return -1, fmt.Errorf("opening directory /%s: %w", rel, err)
		}
		return fd, nil
	}
	parent, err := u.mkdirAll(path.Dir(rel))
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	base := path.Base(rel)
	if err := u.count(); err != nil {
		return -1, err
	}
	if err := unix.Mkdirat(parent, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("creating directory /%s: %w", rel, err)
	}
	fd, err = unix.Openat2(parent, base, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, fmt.Errorf("creating directory /%s (a dangling link or a file is in the way): %w", rel, err)
	}
	return fd, nil
}

// mkdir makes base a directory with mode (less setuid, setgid and sticky,
// plus the owner's rwx, so later layers can write into it), keeping an
// existing directory and its contents.
func (u *unpacker) mkdir(parent int, base string, mode uint32) error {
	var st unix.Stat_t
	err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := removeAt(parent, base); err != nil {
			return err
		}
		err = unix.ENOENT
	}
	if errors.Is(err, unix.ENOENT) {
		err = unix.Mkdirat(parent, base, 0o700)
	}
	if err != nil {
		return err
	}
	// A directory (just checked or made): fchmodat follows no link here.
	return unix.Fchmodat(parent, base, mode&0o777|0o700, 0)
}

// file writes a regular file: created anew (O_EXCL, O_NOFOLLOW) after
// whatever was there is removed, mode without setuid/setgid/sticky.
func (u *unpacker) file(parent int, base string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size > u.limits.FileSize {
		return fmt.Errorf("file of %d bytes, over the per-file limit of %d: %w", hdr.Size, u.limits.FileSize, ErrLimit)
	}
	if u.bytes+hdr.Size > u.limits.Bytes {
		return fmt.Errorf("image unpacks to more than %d bytes: %w", u.limits.Bytes, ErrLimit)
	}
	if err := removeAt(parent, base); err != nil {
		return err
	}
	fd, err := unix.Openat(parent, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(r, hdr.Size))
	u.bytes += n
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("file cut short at %d of %d bytes", n, hdr.Size)
	}
	return f.Chmod(os.FileMode(hdr.Mode&0o777 | 0o400))
}

// hardlink links base to the entry target, which an earlier entry made;
// the target is resolved inside the tree and must not be a directory.
func (u *unpacker) hardlink(parent int, base, rel, target string) error {
	src, err := cleanName(target)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	if src == "." || src == rel {
		return fmt.Errorf("hard link to %q: %w", target, ErrHostile)
	}
	sp, err := u.openDir(path.Dir(src))
	if err != nil {
		return fmt.Errorf("hard link target %q: %w", target, err)
	}
	defer unix.Close(sp)
	var st unix.Stat_t
	if err := unix.Fstatat(sp, path.Base(src), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("hard link target %q: %w", target, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("hard link to the directory %q: %w", target, ErrHostile)
	}
	var cur unix.Stat_t
	if unix.Fstatat(parent, base, &cur, unix.AT_SYMLINK_NOFOLLOW) == nil && cur.Dev == st.Dev && cur.Ino == st.Ino {
		return nil
	}
	if err := removeAt(parent, base); err != nil {
		return err
	}
	return unix.Linkat(sp, path.Base(src), parent, base, 0)
}

// whiteout applies .wh.NAME (remove NAME of a lower layer) or
// .wh..wh..opq (remove everything of lower layers in dir).
func (u *unpacker) whiteout(dir, base string) error {
	parent, err := u.openDir(dir)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil // nothing below to hide
	}
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if base == ".wh..wh..opq" {
		var st unix.Stat_t
		if err := unix.Fstat(parent, &st); err != nil {
			return err
		}
		key := [2]uint64{uint64(st.Dev), uint64(st.Ino)} //nolint:unconvert // uint32 on some platforms
		if u.opaqued[key] {
			return nil
		}
		u.opaqued[key] = true
		names, err := listOpaque(parent)
		if err != nil {
			return err
		}
		for _, n := range names {
			if !u.marked(path.Join(dir, n)) {
				if err := removeAt(parent, n); err != nil {
					return err
				}
			}
		}
		return nil
	}
	name := strings.TrimPrefix(base, ".wh.")
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("whiteout of %q: %w", name, ErrHostile)
	}
	if strings.HasPrefix(name, ".wh.") { // aufs bookkeeping (.wh..wh.plnk)
		u.note("skipped /%s: aufs metadata", path.Join(dir, base))
		return nil
	}
	if u.marked(path.Join(dir, name)) {
		return nil
	}
	return removeAt(parent, name)
}

// listOpaque lists a dir an opaque mark empties of lower layers' entries
// (a test counts the listings).
var listOpaque = readDirNames

func readDirNames(dir int) ([]string, error) {
	fd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

// removeAt removes name in dir, a directory with all it holds; nothing
// there is fine. No link is followed.
func removeAt(dir int, name string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dir, name, 0)
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = unix.Fchmod(fd, 0o700)
	names, err := readDirNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}
