package initproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// holdGit keeps the sandbox from making git on the host run its code
// through a repository in a writable bind. Git runs what a repository
// says without asking (hooks, core.fsmonitor and other commands in its
// config), at the user's next git command there or the next prompt that
// shows the branch, and it reads more than the .git dir: the gitdir a
// .git file names, a commondir, core.hooksPath, included config files,
// and the repositories of its populated submodules, which git status
// enters. So in each writable bind (but those with KeepGit) the init
// holds, read-only, for the repository at the bind's root and each one
// directly in it:
//
//   - its .git (a dir, or a gitdir file and the dir it names), and the
//     commondir, when they lie in a writable bind;
//   - the core.hooksPath dir and the files include.path and
//     includeIf.*.path name in its config, when they lie in a writable
//     bind (missing there: the sandbox could make them, so it does not
//     start);
//   - the same for each submodule its index lists (a gitlink), at any
//     depth; an uninitialised submodule's empty dir is covered with an
//     empty read-only tmpfs, so no repository can be made there.
//
// Every dir on the way from a bind's root to a held path becomes a mount
// point of its own, which the workload can neither rename nor remove:
// otherwise it could move a repository aside and make another with its
// own config in its place (a dir that holds mounts can be renamed; a
// mount point cannot). The worktree stays writable: a change there is
// what the user reviews with git diff.
//
// Writable binds whose sources nest are refused: a repository held in
// one would be writable through the other. Paths are opened beneath a
// bind without following symlinks; a .git that is a symlink at a bind's
// root cannot be held (a link is no mount point) and stops the start.
// Files are read through the binds (as host root, only the idmapped
// binds show the user's files to the init), else under /oldroot with
// RESOLVE_IN_ROOT; what the init cannot read there (another user's) it
// leaves alone: the sandbox cannot write it. What the init reads it
// reads before the workload runs.
func holdGit(c *initConfig, _ []int) error {
	h := &gitHolder{done: map[string]bool{}}
	for _, b := range c.Binds {
		if b.File {
			continue
		}
		h.all = append(h.all, b)
		if b.Writable {
			h.binds = append(h.binds, b)
		}
	}
	for i, a := range h.binds {
		for _, b := range h.binds[i+1:] {
			if within(a.Source, b.Source) || within(b.Source, a.Source) {
				return fmt.Errorf("the writable mounts %s (%s) and %s (%s) overlap: a repository held read-only in one would be writable through the other; mount them apart, or one read-only",
					a.Target, a.Source, b.Target, b.Source)
			}
		}
	}
	for _, b := range h.binds {
		if b.KeepGit {
			continue
		}
		if err := h.holdBind(b); err != nil {
			return fmt.Errorf("holding .git read-only in %s: %w", b.Target, err)
		}
	}
	return nil
}

// maxRepos bounds the repositories held in one sandbox (each costs a few
// mounts, and the kernel's mount-max is 100000): a workload that made
// tens of thousands in its output would otherwise slow every later start
// to minutes.
const maxRepos = 2000

// maxGitDepth bounds the nesting of submodules and config includes.
const maxGitDepth = 8

type gitHolder struct {
	all   []bindSpec      // the directory binds
	binds []bindSpec      // the writable ones
	done  map[string]bool // host paths held or made mount points
	repos int
}

// within reports whether p is dir or lies in it (clean absolute paths).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// bindOf returns the writable bind that shows the host path p, and p
// relative to its source ("." for the source itself).
func (h *gitHolder) bindOf(p string) (bindSpec, string, bool) {
	for _, b := range h.binds {
		if within(p, b.Source) {
			rel := strings.TrimPrefix(strings.TrimPrefix(p, b.Source), "/")
			if rel == "" {
				rel = "."
			}
			return b, rel, true
		}
	}
	return bindSpec{}, "", false
}

// holdBind holds the repository at b's root and those directly in it.
func (h *gitHolder) holdBind(b bindSpec) error {
	if err := h.repo(b.Source, 0, true); err != nil {
		return err
	}
	root, err := unix.Open(newRoot+b.Target, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(root), b.Target)
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == ".git" {
			continue
		}
		if err := h.repo(b.Source+"/"+name, 0, false); err != nil {
			return err
		}
	}
	return nil
}

// repo holds the repository whose worktree is the host dir wt, if it is
// one: wt lies in a writable bind. At a bind's root (strict) a .git
// symlink stops the start; elsewhere a dir that is missing, a symlink or
// holds a .git symlink is left alone, as a repository the workload made
// would be.
func (h *gitHolder) repo(wt string, depth int, strict bool) error {
	b, rel, ok := h.bindOf(wt)
	if !ok {
		return nil
	}
	dir, err := h.open(b, rel, unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	var st unix.Stat_t
	err = unix.Fstatat(dir, ".git", &st, unix.AT_SYMLINK_NOFOLLOW)
	unix.Close(dir)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		if strict {
			return fmt.Errorf("%s is a symbolic link, which cannot be held read-only; mount this repository read-only, or give the mount git: rw", path.Join(rel, ".git"))
		}
		return nil
	}
	if h.repos++; h.repos > maxRepos {
		return fmt.Errorf("more than %d repositories to hold; mount fewer, or read-only", maxRepos)
	}
	git := wt + "/.git"
	if err := h.hold(git); err != nil {
		return err
	}
	gitDir := git
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if gitDir, err = h.readGitdirFile(git); err != nil {
			return err
		}
		if err := h.hold(gitDir); err != nil {
			return fmt.Errorf("the gitdir of %s: %w", git, err)
		}
	}
	return h.gitDir(wt, gitDir, depth)
}

// gitDir holds what the repository's gitdir leads to: its commondir, the
// paths its config names, its submodules.
func (h *gitHolder) gitDir(wt, gitDir string, depth int) error {
	common := gitDir
	if b, err := h.read(gitDir + "/commondir"); err == nil {
		common = hostJoin(gitDir, strings.TrimSpace(string(b)))
		if err := h.hold(common); err != nil {
			return fmt.Errorf("the commondir of %s: %w", gitDir, err)
		}
	}
	hashLen := 20
	for _, cfg := range []string{common + "/config", gitDir + "/config.worktree"} {
		n, err := h.config(wt, cfg, depth)
		if err != nil {
			return err
		}
		hashLen = max(hashLen, n)
	}
	if depth >= maxGitDepth {
		return nil
	}
	index, err := h.read(gitDir + "/index")
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the index of %s: %w", gitDir, err)
	}
	subs, err := gitlinks(index, hashLen)
	if err != nil {
		return fmt.Errorf("the index of %s: %w; mount this repository read-only, or give the mount git: rw", gitDir, err)
	}
	for _, sub := range subs {
		if err := h.submodule(wt, sub, depth); err != nil {
			return err
		}
	}
	return nil
}

// submodule holds the submodule at sub (relative to the worktree wt), if
// it lies in a writable bind: its repository, or, uninitialised (an empty
// dir), the dir itself under an empty read-only tmpfs.
func (h *gitHolder) submodule(wt, sub string, depth int) error {
	p := hostJoin(wt, sub)
	if !within(p, wt) || p == wt {
		return fmt.Errorf("submodule path %q of %s leaves its worktree", sub, wt)
	}
	b, rel, ok := h.bindOf(p)
	if !ok {
		return nil
	}
	if err := h.mountPoints(b, rel); err != nil {
		return err
	}
	dir, err := h.open(b, rel, unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("submodule %s of %s: %w (a missing one could be made a repository; mount this one read-only, or give the mount git: rw)", sub, wt, err)
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, ".git", &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		return h.repo(p, depth+1, true)
	case !errors.Is(err, unix.ENOENT):
		return err
	}
	if h.done[p+"/"] { // covered already (mountPoints marks p itself)
		return nil
	}
	h.done[p+"/"] = true
	if err := attachEmpty(dir); err != nil {
		return fmt.Errorf("covering the uninitialised submodule %s of %s: %w", sub, wt, err)
	}
	return nil
}

// config holds what the config file cfg (host path) leads git to:
// core.hooksPath and included files, and those files' own includes. It
// returns the object hash length the config sets (0: the default).
func (h *gitHolder) config(wt, cfg string, depth int) (int, error) {
	data, err := h.read(cfg)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", cfg, err)
	}
	hashLen := 0
	for _, kv := range gitConfig(data) {
		switch key, val := kv[0], kv[1]; {
		case key == "extensions.objectformat" && strings.EqualFold(val, "sha256"):
			hashLen = 32
		case key == "core.hookspath":
			if err := h.holdNamed(hostPathOf(wt, val), cfg, key); err != nil {
				return 0, err
			}
		case key == "include.path" || strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path"):
			inc := hostPathOf(path.Dir(cfg), val)
			if err := h.holdNamed(inc, cfg, key); err != nil {
				return 0, err
			}
			if depth < maxGitDepth {
				n, err := h.config(wt, inc, depth+1)
				if err != nil {
					return 0, err
				}
				hashLen = max(hashLen, n)
			}
		}
	}
	return hashLen, nil
}

// holdNamed holds p, which key of cfg names; missing in a writable bind,
// it stops the start.
func (h *gitHolder) holdNamed(p, cfg, key string) error {
	if p == "" {
		return nil
	}
	err := h.hold(p)
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s in %s names %s, which is missing in a writable mount: the sandbox could make it; create it, mount the repository read-only, or give the mount git: rw", key, cfg, p)
	}
	return err
}

// hold makes the host path p read-only in the sandbox, if it lies in a
// writable bind, with every dir on the way from the bind's root a mount
// point.
func (h *gitHolder) hold(p string) error {
	b, rel, ok := h.bindOf(p)
	if !ok || h.done[p] {
		return nil
	}
	if rel == "." {
		return fmt.Errorf("%s is the root of the writable mount %s", p, b.Target)
	}
	if err := h.mountPoints(b, path.Dir(rel)); err != nil {
		return err
	}
	fd, err := h.open(b, rel, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := attachClone(fd, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	h.done[p] = true
	return nil
}

// mountPoints makes each dir from b's root (not included) down to rel a
// mount point of its own.
func (h *gitHolder) mountPoints(b bindSpec, rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		p := b.Source + "/" + sub
		if h.done[p] {
			continue
		}
		fd, err := h.open(b, sub, unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		err = attachClone(fd, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("making %s a mount point: %w", sub, err)
		}
		h.done[p] = true
	}
	return nil
}

// open opens rel beneath b's target in the sandbox's view as an O_PATH
// fd, following no symlink, through the mounts made so far.
func (h *gitHolder) open(b bindSpec, rel string, flags uint64) (int, error) {
	return h.openFlags(b, rel, unix.O_PATH|flags)
}

// openFlags opens rel beneath b's target as open does, with flags.
func (h *gitHolder) openFlags(b bindSpec, rel string, flags uint64) (int, error) {
	root, err := unix.Open(newRoot+b.Target, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	return unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_NOFOLLOW | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
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

// maxGitFile bounds what the init reads of a host file (an index of a
// very large repository is tens of megabytes).
const maxGitFile = 256 << 20

// read reads the host file p (absolute): through a bind that shows it,
// without following symlinks, else under /oldroot, its symlinks resolved
// there. A file outside the binds that the init may not read is missing
// (ENOENT).
func (h *gitHolder) read(p string) ([]byte, error) {
	fd, err, inBind := -1, error(nil), false
	for _, b := range h.all {
		if !within(p, b.Source) || p == b.Source {
			continue
		}
		inBind = true
		fd, err = h.openFlags(b, strings.TrimPrefix(p, b.Source+"/"), unix.O_RDONLY|unix.O_NONBLOCK)
		break
	}
	if !inBind {
		root, rerr := unix.Open(oldRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if rerr != nil {
			return nil, rerr
		}
		fd, err = unix.Openat2(root, p, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		unix.Close(root)
		if errors.Is(err, unix.EACCES) {
			err = unix.ENOENT
		}
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxGitFile+1))
	if err == nil && len(b) > maxGitFile {
		err = fmt.Errorf("%s: larger than %d bytes", p, maxGitFile)
	}
	return b, err
}

// readGitdirFile returns the dir a .git file names ("gitdir: PATH").
func (h *gitHolder) readGitdirFile(git string) (string, error) {
	b, err := h.read(git)
	if err != nil {
		return "", err
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s: not a gitdir file", git)
	}
	return hostJoin(path.Dir(git), strings.TrimSpace(target)), nil
}

// hostJoin is p resolved against dir, lexically.
func hostJoin(dir, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dir, p)
}

// hostPathOf is a config value's path: "~/" is left alone (the user's
// own files, outside the binds mcpbox allows to be written), a relative
// one is taken from dir.
func hostPathOf(dir, v string) string {
	if v == "" || strings.HasPrefix(v, "~") || strings.HasPrefix(v, "%(prefix)") {
		return ""
	}
	return hostJoin(dir, v)
}
