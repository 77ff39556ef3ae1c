package initproc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// holdGit makes the .git of each repository in a writable bind read-only:
// the repository at the bind's root and those one level below it (a
// mount of ~/src holds many). Git runs what a repository's .git says
// without asking (hooks, core.fsmonitor and other commands in its config,
// a commondir or gitdir that leads to another config), at the user's next
// git command or the next prompt that shows the branch, so a writable
// .git would let the sandbox run code on the host. The worktree stays
// writable: a change there is what the user reviews with git diff.
//
// Both the repository's dir and its .git become mount points, which the
// workload can neither rename nor remove: otherwise it could move a
// repository aside and make a new one with its own config in its place.
// A bind's root is a mount point already. The bind's attributes carry
// over to the repository's own mount; its .git is read-only, nosuid,
// nodev and noexec. Names are opened beneath the bind without following
// symlinks, as maskInput's are. A .git that is a symlink cannot be held
// (a link is no mount point, and the workload could replace it), so the
// sandbox does not start.
func holdGit(c *initConfig, _ []int) error {
	for _, b := range c.Binds {
		if !b.Writable || b.File || b.KeepGit {
			continue
		}
		if err := holdRepos(newRoot + b.Target); err != nil {
			return fmt.Errorf("holding .git read-only in %s: %w", b.Target, err)
		}
	}
	return nil
}

// holdRepos holds the .git of the repository at dir, a mount point, and
// of each repository directly in it.
func holdRepos(dir string) error {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(root), dir)
	defer f.Close()
	if err := holdGitDir(root, "."); err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == ".git" {
			continue
		}
		if err := holdGitDir(root, name); err != nil {
			return err
		}
	}
	return nil
}

// holdGitDir holds name/.git read-only, name being "." or a directory
// directly in root, after making a directory other than "." a mount
// point of its own. A name that is missing, not a directory or a symlink
// holds no .git.
func holdGitDir(root int, name string) error {
	dir, err := openBeneath(root, name, unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { unix.Close(dir) }()
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, ".git", &st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s/.git is a symbolic link, which cannot be held read-only; mount this repository read-only", name)
	}
	if name != "." {
		if err := attachClone(dir, 0); err != nil {
			return fmt.Errorf("making %s a mount point: %w", name, err)
		}
		// dir is the directory under the new mount; .git is reached
		// through the mount now on top of it.
		unix.Close(dir)
		if dir, err = openBeneath(root, name, unix.O_DIRECTORY); err != nil {
			dir = -1
			return err
		}
	}
	git, err := openBeneath(dir, ".git", 0)
	if err != nil {
		return err
	}
	defer unix.Close(git)
	if err := attachClone(git, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
		return fmt.Errorf("%s/.git: %w", name, err)
	}
	return nil
}

// openBeneath opens name beneath dir as an O_PATH fd, following no
// symlink.
func openBeneath(dir int, name string, flags uint64) (int, error) {
	return unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// attachClone binds the file or directory open as fd onto itself, with
// the attributes set added to those it has.
func attachClone(fd int, set uint64) error {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if set != 0 {
		attr := unix.MountAttr{Attr_set: set}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return err
		}
	}
	return unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}
