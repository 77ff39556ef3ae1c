package initproc

import (
	"errors"

	"golang.org/x/sys/unix"
)

// maskInput covers each of c.InputMasks in the input view (a bind or the
// overlay, already at /newroot/workspace/input) with an empty read-only
// tmpfs, so that the output dir inside the project is seen once, at
// /workspace/output. It runs in the init before the final pivot; the mask
// is a mount of the init's user namespace, which the workload cannot
// unmount.
//
// The path is opened beneath the input without following a symlink, and
// the tmpfs is attached to that descriptor: the input is the user's
// project, and an overlay's upper layer holds whatever an earlier run (or
// a snapshot) put there, so a link at that name must not carry the mount
// elsewhere. A name that is missing, not a directory or reached through a
// link shows none of the output there: nothing to hide.
func maskInput(c *initConfig, _ []int) error {
	if len(c.InputMasks) == 0 {
		return nil
	}
	root, err := unix.Open(newRoot+InputDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &mountError{op: "opening", target: InputDir, err: err}
	}
	defer unix.Close(root)
	for _, rel := range c.InputMasks {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			continue
		}
		if err != nil {
			return &mountError{op: "opening", target: InputDir + "/" + rel, err: err}
		}
		err = attachEmpty(fd)
		unix.Close(fd)
		if err != nil {
			return &mountError{op: "masking", target: InputDir + "/" + rel, err: err}
		}
	}
	return nil
}

// attachEmpty mounts a new empty, read-only, noexec tmpfs on the directory
// open as target.
func attachEmpty(target int) error {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fsfd)
	for _, o := range [][2]string{{"mode", "0555"}, {"size", "4k"}, {"nr_inodes", "2"}} {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return err
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return err
	}
	mnt, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC,
		unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(mnt)
	return unix.MoveMount(mnt, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}
