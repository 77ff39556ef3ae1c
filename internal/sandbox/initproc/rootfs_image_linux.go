package initproc

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	"golang.org/x/sys/unix"
)

// An image root (Spec.Root) replaces the host's system view. The init
// attaches the vetted clone of the whole tree (idmapped as host root) at
// imageStage, on the intermediate root beside /oldroot, and binds its
// top-level directories and /etc entries into /newroot from there. Each
// source is opened beneath the stage with openat2 (RESOLVE_BENEATH, no
// symlinks, no mount crossings) and cloned from that fd, so a symlink in
// the tree (an "etc" pointing at /oldroot/etc, say) can never lead a bind
// to the host. The stage goes away with the host tree in pivotFinal.
const imageStage = "/image"

// imageReserved are top-level names of an image root the sandbox
// provides itself; the image's entries there are never used.
var imageReserved = []string{"dev", "proc", "sys", "tmp", "run", "workspace", "etc", "oldroot", "newroot"}

// imageDirs lists, as sandbox paths, the top-level directories of the
// image root that the sandbox binds executable: the Landlock rules grant
// exec beneath them, as beneath /usr in the host view.
func imageDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("reading root %s: %w", root, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !slices.Contains(imageReserved, e.Name()) {
			out = append(out, "/"+e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// bindImage attaches the image root at the stage and binds its top-level
// directories and symlinks into the new root.
func bindImage(root *bindSpec, fds []int) error {
	if err := os.Mkdir(imageStage, 0o755); err != nil {
		return err
	}
	if err := attachBind(*root, imageStage, fds); err != nil {
		return err
	}
	dir, err := unix.Open(imageStage, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening image root: %w", err)
	}
	defer unix.Close(dir)
	ents, err := os.ReadDir(imageStage)
	if err != nil {
		return fmt.Errorf("reading image root: %w", err)
	}
	for _, e := range ents {
		if slices.Contains(imageReserved, e.Name()) {
			continue
		}
		if err := bindImageEntry(dir, e.Name(), newRoot+"/"+e.Name(), true); err != nil {
			return err
		}
	}
	return nil
}

// bindImageEtc binds the entries of the image's /etc, except the files
// the sandbox synthesizes (skip), read-only and not executable. An /etc
// that is not a directory (a symlink, say) contributes nothing.
func bindImageEtc(skip map[string]string) error {
	etc, err := unix.Openat2(unix.AT_FDCWD, imageStage+"/etc", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening the image's /etc: %w", err)
	}
	defer unix.Close(etc)
	ents, err := os.ReadDir(imageStage + "/etc")
	if err != nil {
		return fmt.Errorf("reading the image's /etc: %w", err)
	}
	for _, e := range ents {
		if _, ok := skip[e.Name()]; ok {
			continue
		}
		if err := bindImageEntry(etc, e.Name(), newRoot+"/etc/"+e.Name(), false); err != nil {
			return err
		}
	}
	return nil
}

// bindImageEntry recreates the symlink, or binds the directory or
// regular file, named name beneath dir onto target; other file types are
// skipped. The symlink's target is only ever resolved inside the sandbox.
func bindImageEntry(dir int, name, target string, exec bool) error {
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return fmt.Errorf("opening image entry %s: %w", target[len(newRoot):], err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return fmt.Errorf("reading image link %s: %w", target[len(newRoot):], err)
		}
		return os.Symlink(string(buf[:n]), target)
	case unix.S_IFDIR, unix.S_IFREG:
	default:
		return nil
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return &mountError{op: "cloning image entry", target: target, err: err}
	}
	defer unix.Close(tree)
	if err := mkTarget(target, isDir); err != nil {
		return err
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return &mountError{op: "attaching image entry", target: target, err: err}
	}
	attr := uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !exec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	return setattr(target, attr)
}
