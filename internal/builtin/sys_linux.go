package builtin

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// resolveFlags keep every lookup beneath its root: ".." and absolute or
// outward symlinks fail with EXDEV, /proc magic links and mount crossings
// are refused.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openat2 opens rel beneath dirfd: with the openat2 syscall where the
// kernel offers it, else (mcpbox's own seccomp filter answers openat2 with
// ENOSYS) with the userspace resolver in beneath_linux.go. It retries
// EAGAIN, which the kernel returns when a rename raced with a
// RESOLVE_BENEATH lookup, and EINTR.
func openat2(dirfd int, rel string, flags uint64, resolve uint64) (int, error) {
	return openat2Mode(dirfd, rel, flags, 0, resolve)
}

func openat2Mode(dirfd int, rel string, flags uint64, mode uint32, resolve uint64) (int, error) {
	if !kernelOpenat2.Load() {
		return openBeneath(dirfd, rel, int(flags|unix.O_CLOEXEC), mode, resolve)
	}
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: uint64(mode), Resolve: resolve}
	for range 16 {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if err == unix.ENOSYS {
			kernelOpenat2.Store(false)
			return openBeneath(dirfd, rel, int(flags|unix.O_CLOEXEC), mode, resolve)
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}

// openRoot opens the host directory of a root. The root itself comes from
// trusted configuration; everything below it is resolved beneath it.
func openRoot(p wpath) (int, error) {
	fd, err := unix.Open(p.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s is not available", p.root)
	}
	return fd, nil
}

// fsError turns a syscall error into a short message that names only the
// workspace path.
func fsError(p wpath, err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s: %w", p, err)
	}
	switch errno {
	case unix.ENOENT:
		return fmt.Errorf("%s: no such file or directory", p)
	case unix.EXDEV:
		return fmt.Errorf("%s: refused: the path leaves its root (via .., an absolute or outward symlink, or a mount)", p)
	case unix.ELOOP:
		return fmt.Errorf("%s: refused: symlink not followed here, or too many symlinks", p)
	case unix.ENOTDIR:
		return fmt.Errorf("%s: not a directory", p)
	case unix.EISDIR:
		return fmt.Errorf("%s: is a directory", p)
	case unix.EACCES, unix.EPERM:
		return fmt.Errorf("%s: permission denied", p)
	case unix.EROFS:
		return fmt.Errorf("%s: read-only file system", p)
	case unix.ENXIO:
		return fmt.Errorf("%s: refused: not a regular file", p)
	case unix.ENAMETOOLONG:
		return fmt.Errorf("%s: name too long", p)
	}
	return fmt.Errorf("%s: %s", p, errno.Error())
}

// kindOf names a non-regular file type for messages and listings.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "file"
}

// openRegular opens rel beneath dirfd for reading and refuses anything
// but a regular file. An O_PATH probe comes first so that a device is
// never opened for real (opening some devices has side effects); the real
// open is O_NONBLOCK, so a FIFO swapped in meanwhile cannot block, and its
// inode must match the probe.
func openRegular(dirfd int, rel string, resolve uint64, name wpath) (*os.File, int64, error) {
	probe, err := openat2(dirfd, rel, unix.O_PATH, resolve)
	if err != nil {
		return nil, 0, fsError(name, err)
	}
	var want unix.Stat_t
	err = unix.Fstat(probe, &want)
	unix.Close(probe)
	if err != nil {
		return nil, 0, fsError(name, err)
	}
	if want.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, 0, fmt.Errorf("%s: refused: is a %s, not a regular file", name, kindOf(want.Mode))
	}
	fd, err := openat2(dirfd, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, resolve)
	if err != nil {
		return nil, 0, fsError(name, err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return nil, 0, fsError(name, err)
	}
	if got.Mode&unix.S_IFMT != unix.S_IFREG || got.Dev != want.Dev || got.Ino != want.Ino {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("%s: refused: file changed while opening", name)
	}
	return os.NewFile(uintptr(fd), name.String()), got.Size, nil
}

// openFile opens a regular file for reading; symlinks beneath the root
// are followed.
func openFile(p wpath) (*os.File, int64, error) {
	root, err := openRoot(p)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(root)
	return openRegular(root, p.rel, resolveFlags, p)
}

// dirEntry is one name in a directory, not followed if it is a symlink.
type dirEntry struct {
	name string
	kind string // "file", "directory", "symlink", ...
	size int64
}

// dirHandle is an open directory beneath a root.
type dirHandle struct {
	fd   int
	path wpath
}

// openDir opens p as a directory; symlinks beneath the root are followed.
func openDir(p wpath) (*dirHandle, error) {
	root, err := openRoot(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	fd, err := openat2(root, p.rel, unix.O_RDONLY|unix.O_DIRECTORY, resolveFlags)
	if err != nil {
		return nil, fsError(p, err)
	}
	return &dirHandle{fd: fd, path: p}, nil
}

func (d *dirHandle) close() { unix.Close(d.fd) }

// sub opens a child directory for a walk. Walks never follow symlinks or
// cross mounts, so they cannot loop or leave the tree.
func (d *dirHandle) sub(name string) (*dirHandle, error) {
	p := d.path.join(name)
	fd, err := openat2(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, resolveFlags|unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return nil, fsError(p, err)
	}
	return &dirHandle{fd: fd, path: p}, nil
}

// open opens a regular child file without following symlinks.
func (d *dirHandle) open(name string) (*os.File, int64, error) {
	return openRegular(d.fd, name, resolveFlags|unix.RESOLVE_NO_SYMLINKS, d.path.join(name))
}

// entries lists the directory sorted by name. Types come from fstatat on
// the directory fd, never from a path string.
func (d *dirHandle) entries(limit int) ([]dirEntry, error) {
	if _, err := unix.Seek(d.fd, 0, 0); err != nil {
		return nil, fsError(d.path, err)
	}
	var names []string
	buf := make([]byte, 32<<10)
	for len(names) < limit {
		n, err := unix.ReadDirent(d.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fsError(d.path, err)
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], limit-len(names), names)
	}
	sort.Strings(names)
	out := make([]dirEntry, 0, len(names))
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed meanwhile
		}
		out = append(out, dirEntry{name: name, kind: kindOf(st.Mode), size: st.Size})
	}
	return out, nil
}

// writeFile replaces p with data: parents are created beneath the root,
// the data goes to a fresh temporary file, and a rename puts it in place,
// so neither a symlink nor a hard link at p is ever written through.
func writeFile(p wpath, data []byte) error {
	root, err := openRoot(p)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	dirRel, base := path.Split(p.rel)
	parent, err := mkdirAll(root, p, strings.TrimRight(dirRel, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(parent)

	perm := uint32(0o644)
	var st unix.Stat_t
	switch err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		perm = st.Mode & 0o777
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s: refused: is a symlink; writes never go through symlinks", p)
	case err == nil:
		return fmt.Errorf("%s: refused: is a %s", p, kindOf(st.Mode))
	case err != unix.ENOENT:
		return fsError(p, err)
	}

	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + base + ".tmp-" + hex.EncodeToString(rnd[:])
	if len(tmp) > 255 {
		tmp = ".mcpbox.tmp-" + hex.EncodeToString(rnd[:])
	}
	fd, err := openat2Mode(parent, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, perm, resolveFlags|unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return fsError(p, err)
	}
	f := os.NewFile(uintptr(fd), p.String())
	_, werr := f.Write(data)
	if werr == nil {
		werr = unix.Fchmod(fd, perm) // the umask may have narrowed it
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(parent, tmp, parent, base)
	}
	if werr != nil {
		unix.Unlinkat(parent, tmp, 0)
		var perr *fs.PathError
		if errors.As(werr, &perr) {
			werr = perr.Err
		}
		return fsError(p, werr)
	}
	return nil
}

// mkdirAll opens (creating as needed) directory rel beneath root. Each
// prefix is resolved beneath the root, so a symlink planted on
// the way is followed only if it stays beneath the root; mkdirat only
// ever creates a plain name inside an already-resolved directory.
func mkdirAll(root int, p wpath, rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	fd, err := openat2(root, rel, unix.O_PATH|unix.O_DIRECTORY, resolveFlags)
	if err != unix.ENOENT {
		if err != nil {
			return -1, fsError(p, err)
		}
		return fd, nil
	}
	cur, err := unix.FcntlInt(uintptr(root), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fsError(p, err)
	}
	prefix := ""
	for _, comp := range strings.Split(rel, "/") {
		if comp == "" || comp == "." {
			continue
		}
		// Plain concatenation: the kernel, not path.Clean, gives ".." its
		// meaning, the same as for the mkdirat beside it.
		if prefix != "" {
			prefix += "/"
		}
		prefix += comp
		if err := unix.Mkdirat(cur, comp, 0o755); err != nil && err != unix.EEXIST {
			unix.Close(cur)
			return -1, fsError(p, err)
		}
		next, err := openat2(root, prefix, unix.O_PATH|unix.O_DIRECTORY, resolveFlags)
		unix.Close(cur)
		if err != nil {
			return -1, fsError(p, err)
		}
		cur = next
	}
	return cur, nil
}

// setProcGroup puts the command in its own process group, so that a
// timeout or stop kills its children too.
func setProcGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// procPath names the open directory for a child's chdir (Cmd.Dir): the
// child resolves it in its own copy of the descriptor table.
func (d *dirHandle) procPath() string { return fmt.Sprintf("/proc/self/fd/%d", d.fd) }
