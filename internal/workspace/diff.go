//go:build linux

package workspace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"mcpbox/internal/textdiff"
)

// maxDiffFile is the largest file Diff reads; larger ones are reported as
// changed without content.
const maxDiffFile = 8 << 20

// Diff writes to w a patch in git's format (`diff --git a/REL b/REL`
// headers, "new file mode" and "deleted file mode" with /dev/null for the
// missing side, "old mode"/"new mode" when the executable bit changed;
// 3 lines of context), so that `git apply` or `patch -p1` in the source
// makes of it what the overlay upper dir makes of its lower dir: changed,
// new and deleted files (whiteouts, opaque directories, a directory
// replacing a file or the reverse remove every lower file), empty ones
// included. What a text patch cannot carry gets a line of its own, which
// git apply and patch skip: binary files (holding a NUL byte) as "Binary
// files a/X and b/X differ", files over 8 MiB as "Files a/X and b/X
// differ" (/dev/null for a missing side), symlinks by target, never
// followed ("Symbolic links a/X -> T and b/X -> U differ"), other special
// files in upper as "Special file b/X not compared". Changes under a
// directory or file named .git are git's own files, which git apply
// refuses and which must not reach a repository unread: they are left
// out of the patch, and one line per .git names them ("Changes under
// .git not shown: ..."). Entries come in path order, a directory's names
// sorted. A file copied up unchanged shows nothing.
func Diff(w io.Writer, lower, upper string) error {
	lfd, err := openRoot(lower)
	if err != nil {
		return fmt.Errorf("diffing: %w", err)
	}
	defer unix.Close(lfd)
	ufd, err := openRoot(upper)
	if err != nil {
		return fmt.Errorf("diffing: %w", err)
	}
	defer unix.Close(ufd)
	d := &differ{w: bufio.NewWriter(w)}
	if err := d.dir(lfd, ufd, "", 0, false); err != nil {
		return fmt.Errorf("diffing %s over %s: %w", upper, lower, err)
	}
	return d.w.Flush()
}

type differ struct {
	w *bufio.Writer
	// collect, when set, takes the paths that changed instead of w (a
	// .git subtree, see gitDir).
	collect *[]string
}

// maxGitNames is how many changed paths under a .git the note names.
const maxGitNames = 10

// side is one path's entry in lower or upper; !ok means absent.
type side struct {
	dir  int
	name string
	st   unix.Stat_t
	ok   bool
}

func stat(dirfd int, name string) side {
	s := side{dir: dirfd, name: name}
	if dirfd >= 0 {
		s.ok = unix.Fstatat(dirfd, name, &s.st, unix.AT_SYMLINK_NOFOLLOW) == nil
	}
	return s
}

func (s side) typ() uint32 { return s.st.Mode & unix.S_IFMT }

func (s side) whiteout() bool { return s.ok && s.typ() == unix.S_IFCHR && s.st.Rdev == 0 }

// dir compares the upper directory ufd with the lower lfd (-1 if there is
// none). opaque: lower names missing from upper are deleted.
func (d *differ) dir(lfd, ufd int, rel string, depth int, opaque bool) error {
	if depth >= maxDepth {
		return fmt.Errorf("%q is %d levels deep: %w", rel, depth, ErrLimit)
	}
	names, err := readNames(ufd)
	if err != nil {
		return fmt.Errorf("reading %q: %w", rel, err)
	}
	if opaque && lfd >= 0 {
		lnames, err := readNames(lfd)
		if err != nil {
			return fmt.Errorf("reading lower %q: %w", rel, err)
		}
		names = mergeSorted(names, lnames)
	}
	for _, name := range names {
		l, u := stat(lfd, name), stat(ufd, name)
		if name == ".git" && d.collect == nil {
			if err := d.gitDir(l, u, joinRel(rel, name), depth+1, opaque); err != nil {
				return err
			}
			continue
		}
		if err := d.entry(l, u, joinRel(rel, name), depth+1, opaque); err != nil {
			return err
		}
	}
	return nil
}

// gitDir notes the changes under a .git (a repository's, or a worktree's
// .git file) on one line instead of diffing them.
func (d *differ) gitDir(l, u side, rel string, depth int, opaque bool) error {
	var changed []string
	sub := &differ{w: d.w, collect: &changed}
	if err := sub.entry(l, u, rel, depth, opaque); err != nil {
		return err
	}
	if len(changed) == 0 {
		return nil
	}
	more := ""
	if len(changed) > maxGitNames {
		more = fmt.Sprintf(" and %d more", len(changed)-maxGitNames)
		changed = changed[:maxGitNames]
	}
	for i, c := range changed {
		changed[i] = quoteName(c)
	}
	fmt.Fprintf(d.w, "Changes under %s not shown (git's own files; git apply refuses them): %s%s\n", quoteName(rel), strings.Join(changed, ", "), more)
	return nil
}

// changed reports that rel differs, to collect if set; false: write it.
func (d *differ) changed(rel string) bool {
	if d.collect == nil {
		return false
	}
	*d.collect = append(*d.collect, rel)
	return true
}

func (d *differ) entry(l, u side, rel string, depth int, opaque bool) error {
	switch {
	case !u.ok && !opaque, !l.ok && u.whiteout():
		return nil
	case !u.ok || u.whiteout():
		return d.deleted(l, rel, depth)
	case u.typ() == unix.S_IFDIR:
		return d.upperDir(l, u, rel, depth, opaque)
	}
	if l.ok && l.typ() != u.typ() || l.ok && l.typ() == unix.S_IFDIR {
		if err := d.deleted(l, rel, depth); err != nil {
			return err
		}
		l.ok = false
	}
	switch u.typ() {
	case unix.S_IFREG:
		return d.file(l, u, rel)
	case unix.S_IFLNK:
		return d.symlink(l, u, rel)
	}
	if !d.changed(rel) {
		fmt.Fprintf(d.w, "Special file b/%s not compared\n", quoteName(rel))
	}
	return nil
}

func (d *differ) upperDir(l, u side, rel string, depth int, opaque bool) error {
	ufd, err := openDirAt(u.dir, u.name)
	if err != nil {
		return fmt.Errorf("opening %q: %w", rel, err)
	}
	defer unix.Close(ufd)
	lfd := -1
	if l.ok && l.typ() != unix.S_IFDIR {
		if err := d.deleted(l, rel, depth); err != nil {
			return err
		}
	} else if l.ok {
		if lfd, err = openDirAt(l.dir, l.name); err != nil {
			return fmt.Errorf("opening lower %q: %w", rel, err)
		}
		defer unix.Close(lfd)
	}
	return d.dir(lfd, ufd, rel, depth, opaque || opaqueMark(ufd) != "")
}

// deleted reports the lower entry l, and everything beneath it, removed.
func (d *differ) deleted(l side, rel string, depth int) error {
	switch l.typ() {
	case unix.S_IFREG:
		return d.file(l, side{}, rel)
	case unix.S_IFLNK:
		return d.symlink(l, side{}, rel)
	case unix.S_IFDIR:
		fd, err := openDirAt(l.dir, l.name)
		if err != nil {
			return fmt.Errorf("opening lower %q: %w", rel, err)
		}
		defer unix.Close(fd)
		return walk(fd, rel, depth, func(n *node) error {
			if n.typ() == unix.S_IFDIR {
				return nil
			}
			return d.deleted(side{dir: n.dir, name: n.name, st: n.st, ok: true}, n.rel, n.depth)
		})
	}
	return nil
}

// content reads a regular file side: nil if absent, big if over
// maxDiffFile.
func content(s side, rel string) (data []byte, big bool, err error) {
	if !s.ok {
		return nil, false, nil
	}
	if s.st.Size > maxDiffFile {
		return nil, true, nil
	}
	f, _, err := openFileAt(s.dir, s.name, &s.st)
	if err != nil {
		return nil, false, fmt.Errorf("opening %q: %w", rel, err)
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, maxDiffFile+1))
	if err != nil {
		return nil, false, fmt.Errorf("reading %q: %w", rel, err)
	}
	return data, len(data) > maxDiffFile, nil
}

func (d *differ) file(l, u side, rel string) error {
	a, abig, err := content(l, rel)
	if err != nil {
		return err
	}
	b, bbig, err := content(u, rel)
	if err != nil {
		return err
	}
	same := bytes.Equal(a, b) && !abig && !bbig
	if l.ok && u.ok && same && gitMode(l) == gitMode(u) || d.changed(rel) {
		return nil
	}
	name := quoteName(rel)
	from, to := "a/"+name, "b/"+name
	if !l.ok {
		from = "/dev/null"
	}
	if !u.ok {
		to = "/dev/null"
	}
	switch {
	case abig || bbig:
		fmt.Fprintf(d.w, "Files %s and %s differ\n", from, to)
		return nil
	case bytes.IndexByte(a, 0) >= 0 || bytes.IndexByte(b, 0) >= 0:
		if !same {
			fmt.Fprintf(d.w, "Binary files %s and %s differ\n", from, to)
			return nil
		}
	}
	fmt.Fprintf(d.w, "diff --git a/%s b/%s\n", name, name)
	switch {
	case !l.ok:
		fmt.Fprintf(d.w, "new file mode %06o\n", gitMode(u))
	case !u.ok:
		fmt.Fprintf(d.w, "deleted file mode %06o\n", gitMode(l))
	case gitMode(l) != gitMode(u):
		fmt.Fprintf(d.w, "old mode %06o\nnew mode %06o\n", gitMode(l), gitMode(u))
	}
	if !same {
		fmt.Fprintf(d.w, "--- %s\n+++ %s\n", from, to)
		writeHunks(d.w, textdiff.Lines(splitLines(string(a)), splitLines(string(b)), maxLCSCells))
	}
	return nil
}

// gitMode is a regular file's mode as git records it: 100755 when anyone
// may execute it, else 100644.
func gitMode(s side) uint32 {
	if s.st.Mode&0o111 != 0 {
		return 0o100755
	}
	return 0o100644
}

func (d *differ) symlink(l, u side, rel string) error {
	a, b := "/dev/null", "/dev/null"
	var ta, tb string
	var err error
	if l.ok {
		if ta, err = readlinkAt(l.dir, l.name); err != nil {
			return fmt.Errorf("reading link %q: %w", rel, err)
		}
		a = "a/" + quoteName(rel) + " -> " + quoteName(ta)
	}
	if u.ok {
		if tb, err = readlinkAt(u.dir, u.name); err != nil {
			return fmt.Errorf("reading link %q: %w", rel, err)
		}
		b = "b/" + quoteName(rel) + " -> " + quoteName(tb)
	}
	if l.ok && u.ok && ta == tb || d.changed(rel) {
		return nil
	}
	fmt.Fprintf(d.w, "Symbolic links %s and %s differ\n", a, b)
	return nil
}

// mergeSorted returns the union of two sorted name lists, sorted.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}

// quoteName writes a name (or link target) the sandbox chose as a Go
// quoted string when it holds a control character or invalid UTF-8, as
// git quotes paths: a newline in a name must not forge a "+++ b/..."
// header, an escape sequence must not repaint the reader's terminal.
func quoteName(name string) string {
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError || r == '"' {
			return strconv.Quote(name)
		}
	}
	return name
}
