package sandbox

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"mcpbox/internal/sandbox/initproc"
)

// planGit fills the GitOps of the writable binds: what the init holds
// read-only so that the sandbox cannot make git on the host run its code
// through a repository in a writable mount. Git runs what a repository
// says without asking (hooks, core.fsmonitor and other commands in its
// config), at the user's next git command there or the next prompt that
// shows the branch, and it reads more than the .git dir: the gitdir a
// .git file names, a commondir, core.hooksPath, hooks that are symlinks,
// included config files, and the repositories of its populated
// submodules, which git status enters. So in each writable bind (but
// those with KeepGit) the plan holds, read-only, for the repository at
// the bind's root, each one directly in it and each repository the
// bind's source lies in:
//
//   - its .git (a dir, or a gitdir file and the dir it names), and the
//     commondir, when they lie in a writable bind;
//   - the core.hooksPath dir, where a hook or the hooks dir that is a
//     symlink leads, and the files include.path and includeIf.*.path
//     name in its config, when they lie in a writable bind (missing
//     there: the sandbox could make them, so it does not start);
//   - the same for each submodule its index lists (a gitlink, of a split
//     index too; skip-worktree ones aside), at any depth; an
//     uninitialised submodule's empty dir is covered with an empty
//     read-only tmpfs, so no repository can be made there.
//
// Every dir on the way from a bind's root to a held path becomes a mount
// point of its own, which the workload can neither rename nor remove:
// otherwise it could move a repository aside and make another with its
// own config in its place (a dir that holds mounts can be renamed; a
// mount point cannot). The worktree stays writable: a change there is
// what the user reviews with git diff.
//
// The plan is made here, as the user (who can read every repository the
// binds show: as host root the init could not), before the workload
// runs; paths taken from git's files are resolved as the host resolves
// them (symlinks, ".."). The init applies it beneath each bind without
// following symlinks, and fails if a path is missing or reached through
// a symlink since.
// Writable binds whose sources nest are refused: a repository held in
// one would be writable through the other.
func planGit(binds []bindSpec, home string) error {
	p := &gitPlan{home: home, held: map[string]bool{}, mounted: map[string]bool{}}
	var writable []*bindSpec
	for i := range binds {
		b := &binds[i]
		if !b.Writable {
			continue
		}
		writable = append(writable, b)
		if !b.File {
			p.binds = append(p.binds, b)
		}
	}
	for i, a := range writable {
		for _, b := range writable[i+1:] {
			if within(a.Source, b.Source) || within(b.Source, a.Source) {
				return fmt.Errorf("the writable mounts %s (%s) and %s (%s) overlap: a repository held read-only in one would be writable through the other; mount them apart, or one read-only",
					a.Target, a.Source, b.Target, b.Source)
			}
		}
	}
	for _, b := range p.binds {
		if b.KeepGit {
			continue
		}
		if err := p.bind(b); err != nil {
			return fmt.Errorf("holding the repositories of the writable mount %s (%s): %w", b.Target, b.Source, err)
		}
	}
	return nil
}

// maxGitOps bounds the mounts a plan makes (the kernel's mount-max is
// 100000): a workload that made tens of thousands of repositories or
// submodule entries in its output would otherwise slow every later start
// to minutes, and then stop it anyway.
const maxGitOps = 4000

// maxGitDepth bounds the nesting of submodules and of config includes.
const maxGitDepth = 16

// maxGitFile bounds what the plan reads of a git file (an index of a very
// large repository is tens of megabytes).
const maxGitFile = 256 << 20

type gitPlan struct {
	home    string
	binds   []*bindSpec     // the writable directory binds
	held    map[string]bool // host paths held read-only
	mounted map[string]bool // host paths made mount points, or covered (path + "/")
	ops     int
}

// bindOf returns the writable bind that shows the host path p, and p
// relative to its source ("." for the source itself).
func (p *gitPlan) bindOf(hp string) (*bindSpec, string, bool) {
	for _, b := range p.binds {
		if within(hp, b.Source) {
			rel := strings.TrimPrefix(strings.TrimPrefix(hp, b.Source), "/")
			if rel == "" {
				rel = "."
			}
			return b, rel, true
		}
	}
	return nil, "", false
}

// add appends an op to b's plan.
func (p *gitPlan) add(b *bindSpec, rel string, op uint8) error {
	if p.ops++; p.ops > maxGitOps {
		return fmt.Errorf("more than %d mounts to hold its repositories; mount fewer, or read-only", maxGitOps)
	}
	b.GitOps = append(b.GitOps, initproc.GitOp{Rel: rel, Op: op})
	return nil
}

// bind plans the repository at b's root, those directly in it, and what
// the repositories b's source lies in lead to in it.
func (p *gitPlan) bind(b *bindSpec) error {
	for dir := path.Dir(b.Source); ; dir = path.Dir(dir) {
		if err := p.enclosing(dir); err != nil {
			return err
		}
		if dir == "/" {
			break
		}
	}
	if err := p.repo(b.Source, 0, true); err != nil {
		return err
	}
	ents, err := os.ReadDir(b.Source)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() != ".git" && e.IsDir() {
			if err := p.repo(b.Source+"/"+e.Name(), 0, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// enclosing follows the repository whose worktree is dir, if it is one:
// git status there enters its submodules, which may lie in a bind.
func (p *gitPlan) enclosing(dir string) error {
	git := path.Join(dir, ".git")
	fi, err := os.Stat(git) // a .git link to a dir is a repository too
	if err != nil {
		return nil // none, or not the user's to read
	}
	gitDir := git
	if !fi.IsDir() {
		if gitDir, err = readGitdirFile(git); err != nil {
			return nil // no repository git would use either
		}
	}
	if gitDir, err = p.resolve(gitDir); err != nil {
		return err
	}
	f, err := os.Open(gitDir)
	if err != nil {
		return nil // not the user's to read: git run by the user does not use it either
	}
	f.Close()
	return p.gitDir(dir, gitDir, 0)
}

// repo plans the repository whose worktree is the host dir wt, if it is
// one and lies in a writable bind. At a bind's root and for a submodule
// (strict) a .git symlink stops the start (a link is no mount point);
// elsewhere a dir that holds a .git symlink is left alone, as a
// repository the workload made would be.
func (p *gitPlan) repo(wt string, depth int, strict bool) error {
	if _, _, ok := p.bindOf(wt); !ok {
		return nil
	}
	git := wt + "/.git"
	fi, err := os.Lstat(git)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil && !strict:
		return nil // a dir the user cannot read (chmod 0): git cannot use it either
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		if strict {
			return fmt.Errorf("%s is a symbolic link, which cannot be held read-only; mount this repository read-only, or give the mount git: rw", git)
		}
		return nil
	}
	if err := p.hold(git); err != nil {
		return err
	}
	gitDir := git
	if !fi.IsDir() {
		if gitDir, err = readGitdirFile(git); err != nil {
			return err
		}
		if gitDir, err = p.resolve(gitDir); err != nil {
			return fmt.Errorf("the gitdir of %s: %w", git, err)
		}
		if err := p.hold(gitDir); err != nil {
			return fmt.Errorf("the gitdir of %s: %w", git, err)
		}
	}
	return p.gitDir(wt, gitDir, depth)
}

// gitDir plans what the repository's gitdir leads to: its commondir, its
// hooks, the paths its config names, its submodules.
func (p *gitPlan) gitDir(wt, gitDir string, depth int) error {
	if depth > maxGitDepth {
		return fmt.Errorf("%s: submodules nested more than %d deep", wt, maxGitDepth)
	}
	common := gitDir
	switch b, err := readGitFile(gitDir + "/commondir"); {
	case err == nil:
		if common, err = p.resolve(joinRaw(gitDir, strings.TrimRight(string(b), "\r\n"))); err != nil {
			return fmt.Errorf("the commondir of %s: %w", gitDir, err)
		}
		if err := p.hold(common); err != nil {
			return fmt.Errorf("the commondir of %s: %w", gitDir, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading the commondir of %s: %w", gitDir, err)
	}
	hashLen, hooks := 20, common+"/hooks"
	for _, cfg := range append(p.globalConfigs(), common+"/config", gitDir+"/config.worktree") {
		n, hp, err := p.config(wt, cfg, cfg, 0)
		if err != nil {
			return err
		}
		hashLen = max(hashLen, n)
		if hp != "" {
			hooks = hp
		}
	}
	if err := p.hooks(hooks); err != nil {
		return err
	}
	subs, err := indexGitlinks(gitDir, hashLen)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if err := p.submodule(wt, sub, depth); err != nil {
			return err
		}
	}
	return nil
}

// indexGitlinks returns the submodules of gitDir's index, and of the
// shared index a split index names.
func indexGitlinks(gitDir string, hashLen int) ([]string, error) {
	index, err := readGitFile(gitDir + "/index")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the index of %s: %w", gitDir, err)
	}
	subs, shared, err := gitlinks(index, hashLen)
	if err == nil && shared != nil {
		var data []byte
		if data, err = readGitFile(gitDir + "/sharedindex." + hex.EncodeToString(shared)); err == nil {
			var more []string
			more, _, err = gitlinks(data, hashLen)
			subs = append(subs, more...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the index of %s: %w; mount this repository read-only, or give the mount git: rw", gitDir, err)
	}
	return subs, nil
}

// hooks holds where the hooks dir leads when it is a symlink, and where
// each hook in it that is a symlink leads.
func (p *gitPlan) hooks(dir string) error {
	real, err := p.resolve(dir)
	if err != nil {
		return fmt.Errorf("the hooks dir %s: %w", dir, err)
	}
	if real != dir {
		if err := p.holdNamed(real, dir, "the hooks dir"); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(real)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) && !p.inBind(real) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the hooks dir %s: %w", real, err)
	}
	for _, e := range ents {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		target, err := os.Readlink(real + "/" + e.Name())
		if err != nil {
			return fmt.Errorf("reading the hook %s/%s: %w", real, e.Name(), err)
		}
		to, err := p.resolve(joinRaw(real, target))
		if err != nil {
			return fmt.Errorf("the hook %s/%s: %w", real, e.Name(), err)
		}
		if err := p.holdNamed(to, real+"/"+e.Name(), "the hook"); err != nil {
			return err
		}
	}
	return nil
}

// submodule plans the submodule at sub (relative to the worktree wt), if
// it lies in a writable bind: its repository, or, uninitialised (an empty
// dir), the dir itself under an empty read-only tmpfs.
func (p *gitPlan) submodule(wt, sub string, depth int) error {
	hp := path.Join(wt, sub)
	if !within(hp, wt) || hp == wt {
		return fmt.Errorf("submodule path %q of %s leaves its worktree", sub, wt)
	}
	b, rel, ok := p.bindOf(hp)
	if !ok {
		return nil
	}
	if rel == "." {
		if _, err := os.Lstat(hp + "/.git"); err != nil {
			return fmt.Errorf("the mount's source is the uninitialised submodule %s of %s: the sandbox could make it a repository, which git status in %[2]s enters; initialise it, mount it read-only, or give the mount git: rw", sub, wt)
		}
	}
	if err := p.mountPoints(b, rel); err != nil {
		return fmt.Errorf("submodule %s of %s: %w (a missing one could be made a repository; mount this one read-only, or give the mount git: rw)", sub, wt, err)
	}
	switch _, err := os.Lstat(hp + "/.git"); {
	case err == nil:
		return p.repo(hp, depth+1, true)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if p.mounted[hp+"/"] {
		return nil
	}
	p.mounted[hp+"/"] = true
	return p.add(b, rel, initproc.GitCover)
}

// config plans what the config file cfg (physical; as written: named)
// leads git to: the files it includes, and their own includes, a
// relative one taken from the dir of the name as written, as git does.
// It returns the object hash length the config sets (0: the default) and
// the hooks dir it names ("": none).
func (p *gitPlan) config(wt, cfg, named string, depth int) (hashLen int, hooks string, err error) {
	if depth > maxGitDepth {
		return 0, "", fmt.Errorf("%s: includes nested more than %d deep", cfg, maxGitDepth)
	}
	data, err := readGitFile(cfg)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) && !p.inBind(cfg) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("reading %s: %w", cfg, err)
	}
	for _, kv := range gitConfig(data) {
		switch key, val := kv[0], kv[1]; {
		case key == "extensions.objectformat" && strings.EqualFold(val, "sha256"):
			hashLen = 32
		case key == "core.hookspath":
			if hooks, err = p.pathOf(wt, val); err != nil {
				return 0, "", fmt.Errorf("%s in %s: %w", key, cfg, err)
			}
			if err := p.holdNamed(hooks, cfg, key); err != nil {
				return 0, "", err
			}
		case key == "include.path" || strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path"):
			asWritten := p.expand(path.Dir(named), val)
			inc, err := p.pathOf(path.Dir(named), val)
			if err != nil {
				return 0, "", fmt.Errorf("%s in %s: %w", key, cfg, err)
			}
			if err := p.holdNamed(inc, cfg, key); err != nil {
				return 0, "", err
			}
			if inc == "" {
				continue
			}
			n, hp, err := p.config(wt, inc, asWritten, depth+1)
			if err != nil {
				return 0, "", err
			}
			hashLen = max(hashLen, n)
			if hp != "" {
				hooks = hp
			}
		}
	}
	return hashLen, hooks, nil
}

// pathOf is a config value's path, physical (see expand and resolve).
func (p *gitPlan) pathOf(dir, v string) (string, error) {
	if v = p.expand(dir, v); v == "" {
		return "", nil
	}
	return p.resolve(v)
}

// expand is a config value's path as git reads it, before links: "~/" is
// the home dir, a relative one is taken from dir; "" for none this user
// could write (another user's home, a path from git's prefix).
func (p *gitPlan) expand(dir, v string) string {
	switch {
	case v == "" || strings.HasPrefix(v, "%(prefix)"):
		return ""
	case v == "~" || strings.HasPrefix(v, "~/"):
		if p.home == "" {
			return ""
		}
		v = p.home + v[1:]
	case strings.HasPrefix(v, "~"):
		return "" // another user's home: not this user's to write
	}
	return joinRaw(dir, v)
}

// globalConfigs are the user's and the system's git config files, which
// every repository reads first.
func (p *gitPlan) globalConfigs() []string {
	out := []string{"/etc/gitconfig"}
	if p.home != "" {
		out = append(out, p.home+"/.gitconfig")
		xdg := os.Getenv("XDG_CONFIG_HOME")
		if xdg == "" {
			xdg = p.home + "/.config"
		}
		out = append(out, xdg+"/git/config")
	}
	return out
}

// holdNamed holds hp, which what names by key; missing in a writable
// bind, it stops the start.
func (p *gitPlan) holdNamed(hp, what, key string) error {
	if hp == "" {
		return nil
	}
	err := p.hold(hp)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s in %s names %s, which is missing in a writable mount: the sandbox could make it; create it, mount the repository read-only, or give the mount git: rw", key, what, hp)
	}
	return err
}

// hold plans hp read-only, if it lies in a writable bind, with every dir
// on the way from the bind's root a mount point.
func (p *gitPlan) hold(hp string) error {
	b, rel, ok := p.bindOf(hp)
	if !ok || p.held[hp] {
		return nil
	}
	if rel == "." {
		return fmt.Errorf("%s is the root of the writable mount %s", hp, b.Target)
	}
	if err := p.mountPoints(b, path.Dir(rel)); err != nil {
		return err
	}
	if _, err := os.Lstat(hp); err != nil {
		return err
	}
	p.held[hp] = true
	return p.add(b, rel, initproc.GitHold)
}

// mountPoints plans each dir from b's root (not included) down to rel a
// mount point of its own.
func (p *gitPlan) mountPoints(b *bindSpec, rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		hp := b.Source + "/" + sub
		if p.mounted[hp] {
			continue
		}
		fi, err := os.Lstat(hp)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", hp)
		}
		p.mounted[hp] = true
		if err := p.add(b, sub, initproc.GitMountPoint); err != nil {
			return err
		}
	}
	return nil
}

// inBind reports whether the host path hp lies in a writable bind.
func (p *gitPlan) inBind(hp string) bool {
	_, _, ok := p.bindOf(hp)
	return ok
}

// resolve is the host path raw with its links and ".." resolved as the
// host resolves them, one component at a time (a missing rest appended).
// A link on the way that lies in a writable bind, outside what is held,
// is an error: the workload could point it elsewhere once the target is
// held.
func (p *gitPlan) resolve(raw string) (string, error) {
	if !path.IsAbs(raw) {
		return "", fmt.Errorf("%s: not an absolute path", raw)
	}
	todo := strings.Split(raw, "/")
	cur := "/"
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			// Missing, or not the user's to read: the rest as written.
			return path.Join(append([]string{next}, todo...)...), nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if p.inBind(next) && !p.isHeld(next) {
			return "", fmt.Errorf("%s is reached through the symbolic link %s in a writable mount, which the sandbox could point elsewhere; name the path without it, mount it read-only, or give the mount git: rw", raw, next)
		}
		if hops++; hops > 255 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", raw)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}

// isHeld reports whether the host path hp is or lies in a held path.
func (p *gitPlan) isHeld(hp string) bool {
	for h := range p.held {
		if within(hp, h) {
			return true
		}
	}
	return false
}

// readGitFile reads a git file, a regular one of at most maxGitFile
// bytes.
func readGitFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxGitFile+1))
	if err == nil && len(b) > maxGitFile {
		err = fmt.Errorf("%s: larger than %d bytes", name, maxGitFile)
	}
	return b, err
}

// readGitdirFile returns the dir a .git file names ("gitdir: PATH").
func readGitdirFile(git string) (string, error) {
	b, err := readGitFile(git)
	if err != nil {
		return "", err
	}
	target, ok := strings.CutPrefix(strings.TrimRight(string(b), "\r\n"), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("%s: not a gitdir file", git)
	}
	return joinRaw(path.Dir(git), target), nil
}

// joinRaw is p taken from dir, unclean, for real to resolve "..".
func joinRaw(dir, p string) string {
	if path.IsAbs(p) {
		return p
	}
	return dir + "/" + p
}
