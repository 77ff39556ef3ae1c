package initproc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// gitOp is one mount of a writable bind's git plan (the host's planGit):
// what keeps the sandbox from making git on the host run its code
// through a repository in the bind.
type gitOp struct {
	Rel string `json:"rel"` // beneath the bind's target, clean, relative
	Op  uint8  `json:"op"`
}

// The ops of a git plan.
const (
	gitMountPoint uint8 = iota + 1 // bind the dir onto itself: it cannot be renamed or removed
	gitHold                        // bind it onto itself read-only
	gitCover                       // cover the (empty) dir with an empty read-only tmpfs
)

// holdGit applies each writable bind's git plan, in order (a dir is made
// a mount point before what it holds is held). A path is opened beneath
// the bind without following symlinks, through the mounts made so far;
// one that is missing or has become a symlink since the host planned
// stops the start.
func holdGit(c *initConfig, _ []int) error {
	for _, b := range c.Binds {
		for _, op := range b.GitOps {
			if err := applyGitOp(newRoot+b.Target, op); err != nil {
				return &mountError{op: "holding for git", target: b.Target + "/" + op.Rel, err: err}
			}
		}
	}
	return nil
}

func applyGitOp(target string, op gitOp) error {
	root, err := unix.Open(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	flags := uint64(unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC)
	if op.Op != gitHold {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat2(root, op.Rel, &unix.OpenHow{
		Flags:   flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	switch op.Op {
	case gitMountPoint:
		return attachClone(fd, 0)
	case gitHold:
		return attachClone(fd, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	case gitCover:
		return attachEmpty(fd)
	}
	return fmt.Errorf("unknown git op %d", op.Op)
}

// attachClone binds the file or directory open as fd onto itself, with
// its mounts below, adding the attributes set.
func attachClone(fd int, set uint64) error {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if set != 0 {
		attr := unix.MountAttr{Attr_set: set}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return err
		}
	}
	return unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}
