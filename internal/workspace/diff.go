//go:build linux

package workspace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode"
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
// files in upper as "Special file b/X not compared". Names are quoted as
// git quotes them (quotePath). Left out of the patch, each named on one
// line ("Changes under X not shown (why): ..."), are what must not reach
// a repository through it: changes under a .git as git reads the name
// (isGitName), a symlink replaced by something else (patch -p1 would
// write through it) and a directory holding a repository replaced by a
// file. Left out too, each on a line of its own naming the agent's copy
// in upper, is a change to a file the project changed after the agent's
// last write to it (the lower file's mtime is the later): the agent
// worked on an older copy, and the patch would undo the project's change.
// Entries come in path order, a directory's names sorted. A file copied
// up unchanged shows nothing.
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
	d := &differ{w: bufio.NewWriter(w), upper: upper}
	err = d.dir(lfd, ufd, "", 0, false)
	// What was written before an error is shown too: the patch up to the
	// entry that failed.
	ferr := d.w.Flush()
	if tw, ok := w.(*TermWriter); ok && ferr == nil {
		ferr = tw.Flush() // a character the patch's end cut short
	}
	if err != nil {
		return fmt.Errorf("diffing %s over %s: %w", upper, lower, err)
	}
	return ferr
}

type differ struct {
	w     *bufio.Writer
	upper string // the upper dir's path, to name the agent's copy of a stale file
	// collect, when set, takes the paths that changed instead of w (an
	// entry left out of the patch, see notShown).
	collect *[]string
}

// maxNotShown is how many changed paths a notShown line names.
const maxNotShown = 10

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
		if d.collect == nil && isGitName(name) {
			if err := d.notShown(l, u, joinRel(rel, name), depth+1, opaque, whyGit); err != nil {
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

// Why changes are not shown in the patch (notShown, stale).
const (
	whyGit   = "git's own files; git apply refuses them"
	whyLink  = "it replaces a symlink, which a patch cannot remove: patch -p1 would write through it"
	whyRepo  = "it replaces a directory that holds a git repository, which the patch leaves in place"
	whyStale = "the project changed it after the agent copied it: the agent worked on an older copy, and the patch would undo the project's change"
)

// stale reports whether the project changed the lower file l after the
// agent's copy u in upper (or u's whiteout) was made: the agent then
// worked on an older copy. The copy was made when u was born (overlayfs
// copies a file up at its first write); where the file system keeps no
// birth time, u's mtime stands in: a copy-up keeps the lower's mtime and
// a write moves it on, which misses a change between the agent's first
// and last write.
func stale(l, u side) bool {
	if !l.ok || !u.ok || l.typ() != unix.S_IFREG {
		return false
	}
	since := u.st.Mtim
	var stx unix.Statx_t
	if unix.Statx(u.dir, u.name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx) == nil && stx.Mask&unix.STATX_BTIME != 0 {
		since = unix.Timespec{Sec: stx.Btime.Sec, Nsec: int64(stx.Btime.Nsec)}
	}
	return l.st.Mtim.Sec > since.Sec || l.st.Mtim.Sec == since.Sec && l.st.Mtim.Nsec > since.Nsec
}

// staleLine notes a stale file's change instead of diffing it.
func (d *differ) staleLine(rel string) {
	fmt.Fprintf(d.w, "Changes to %s not shown (%s); the agent's copy is %s\n", quotePath("", rel), whyStale, quotePath("", filepath.Join(d.upper, rel)))
}

// notShown notes the changes of an entry (and beneath it) on one line
// instead of diffing them, saying why: a .git (a repository's, or a
// worktree's .git file), or a replacement a patch cannot make safely.
func (d *differ) notShown(l, u side, rel string, depth int, opaque bool, why string) error {
	var changed []string
	sub := &differ{w: d.w, collect: &changed}
	if err := sub.entry(l, u, rel, depth, opaque); err != nil {
		return err
	}
	if len(changed) == 0 {
		return nil
	}
	more := ""
	if len(changed) > maxNotShown {
		more = fmt.Sprintf(" and %d more", len(changed)-maxNotShown)
		changed = changed[:maxNotShown]
	}
	for i, c := range changed {
		changed[i] = quotePath("", c)
	}
	fmt.Fprintf(d.w, "Changes under %s not shown (%s): %s%s\n", quotePath("", rel), why, strings.Join(changed, ", "), more)
	return nil
}

// holdsGit reports whether the lower directory l holds a .git anywhere.
func holdsGit(l side, rel string, depth int) (bool, error) {
	fd, err := openDirAt(l.dir, l.name)
	if err != nil {
		return false, fmt.Errorf("opening lower %q: %w", rel, err)
	}
	defer unix.Close(fd)
	err = walk(fd, rel, depth, func(n *node) error {
		if isGitName(n.name) {
			return errFoundGit
		}
		return nil
	})
	if errors.Is(err, errFoundGit) {
		return true, nil
	}
	return false, err
}

var errFoundGit = errors.New("found a .git")

// isGitName reports whether a path component is one git refuses in a
// patch as its own directory: ".git" in any case, with trailing spaces or
// dots, or with characters HFS+ ignores, and NTFS's short name "git~1"
// (git's verify_path with core.protectNTFS and protectHFS). On a
// case-insensitive file system ".GIT/hooks/x" is a hook too.
func isGitName(name string) bool {
	name = strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, name)
	// NTFS ends a name at a stream (":$INDEX_ALLOCATION") and reads '\\'
	// as a separator; trailing dots and spaces fall away.
	if i := strings.IndexAny(name, `\:`); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimRight(name, " .")
	return strings.EqualFold(name, ".git") || strings.EqualFold(name, "git~1")
}

// hfsIgnored: the code points HFS+ drops when it compares names.
func hfsIgnored(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
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
	case u.whiteout() && stale(l, u) && d.collect == nil:
		d.staleLine(rel)
		return nil
	case !u.ok || u.whiteout():
		return d.deleted(l, rel, depth)
	}
	if d.collect == nil && l.ok && l.typ() != u.typ() {
		// A patch removes files, not symlinks, and cannot replace a
		// directory it leaves a repository in: say so rather than let
		// patch -p1 write through the link, or git apply stop half-way.
		if l.typ() == unix.S_IFLNK {
			return d.notShown(l, u, rel, depth, opaque, whyLink)
		}
		if l.typ() == unix.S_IFDIR {
			git, err := holdsGit(l, rel, depth)
			if err != nil {
				return err
			}
			if git {
				return d.notShown(l, u, rel, depth, opaque, whyRepo)
			}
		}
	}
	if u.typ() == unix.S_IFDIR {
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
		fmt.Fprintf(d.w, "Special file %s not compared\n", quotePath("b/", rel))
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
			l := side{dir: n.dir, name: n.name, st: n.st, ok: true}
			if d.collect == nil && isGitName(n.name) {
				// A repository inside the removed dir: its files are
				// git's own, noted, not patched.
				if err := d.notShown(l, side{}, n.rel, n.depth, true, whyGit); err != nil {
					return err
				}
				if n.typ() == unix.S_IFDIR {
					return errSkip
				}
				return nil
			}
			if n.typ() == unix.S_IFDIR {
				return nil
			}
			return d.deleted(l, n.rel, n.depth)
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
	if stale(l, u) {
		d.staleLine(rel)
		return nil
	}
	a0, b0 := quotePath("a/", rel), quotePath("b/", rel)
	from, to := a0, b0
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
	fmt.Fprintf(d.w, "diff --git %s %s\n", a0, b0)
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
		a = quotePath("a/", rel) + " -> " + quotePath("", ta)
	}
	if u.ok {
		if tb, err = readlinkAt(u.dir, u.name); err != nil {
			return fmt.Errorf("reading link %q: %w", rel, err)
		}
		b = quotePath("b/", rel) + " -> " + quotePath("", tb)
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

// quotePath is prefix+name as git writes a path in a patch: as it is,
// or, when name holds a space, a control character, '"', '\\', invalid
// UTF-8 or a character that renders as nothing or reorders the text
// (format characters such as bidi overrides), the whole in double quotes
// with C escapes and the bytes of such characters in octal. Both git
// apply and patch -p1 read that form; unquoted, patch ends a name at its
// first space (so "sub/.git x" would patch sub/.git), a newline in a name
// would forge a header, an escape sequence would repaint the reader's
// terminal.
func quotePath(prefix, name string) string {
	if !needsQuote(name) {
		return prefix + name
	}
	var b strings.Builder
	b.WriteByte('"')
	for p := prefix + name; p != ""; {
		r, size := utf8.DecodeRuneInString(p)
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case plainRune(r) && !(r == utf8.RuneError && size == 1):
			b.WriteString(p[:size])
		default:
			for i := range size {
				fmt.Fprintf(&b, "\\%03o", p[i])
			}
		}
		p = p[size:]
	}
	b.WriteByte('"')
	return b.String()
}

// needsQuote reports whether quotePath must quote name.
func needsQuote(name string) bool {
	if !utf8.ValidString(name) {
		return true
	}
	for _, r := range name {
		if r == ' ' || r == '"' || r == '\\' || !plainRune(r) {
			return true
		}
	}
	return false
}

// plainRune: r renders as itself (not a control, format or other
// invisible character), so a patch may show it as it is.
func plainRune(r rune) bool {
	return unicode.IsGraphic(r) && !unicode.Is(unicode.Cf, r)
}
