//go:build linux

package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Export copies the regular files under src matching rules.Include into
// dst (made 0700 if missing), keeping their relative paths; new
// directories are 0700 and files 0644 (never executable). Symlinks in src
// are never followed, nor in dst below its root; an existing file is not
// overwritten. A file that would pass MaxTotal is refused and later,
// smaller ones may still fit. Matching entries that are not copied are
// returned in Refused with the reason; the error is for failures of src
// or dst as a whole or of I/O. Directories symlinked into src are not
// descended.
func Export(src, dst string, rules ArtifactRules) ([]Exported, []Refused, error) {
	for _, p := range rules.Include {
		if _, err := path.Match(strings.ReplaceAll(p, "**", "*"), ""); err != nil || p == "" {
			return nil, nil, fmt.Errorf("exporting: %q: %w", p, ErrPattern)
		}
	}
	e := exporter{rules: rules, max: rules.MaxSize, total: rules.MaxTotal}
	if e.max <= 0 {
		e.max = DefaultMaxSize
	}
	if e.total <= 0 {
		e.total = DefaultMaxTotal
	}
	sfd, err := openRoot(src)
	if err != nil {
		return nil, nil, fmt.Errorf("exporting: %w", err)
	}
	defer unix.Close(sfd)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return nil, nil, fmt.Errorf("exporting: %w", err)
	}
	if e.dst, err = openRoot(dst); err != nil {
		return nil, nil, fmt.Errorf("exporting: %w", err)
	}
	defer unix.Close(e.dst)
	if err := walk(sfd, "", 0, e.visit); err != nil {
		return e.done, e.refused, fmt.Errorf("exporting %s: %w", src, err)
	}
	return e.done, e.refused, nil
}

type exporter struct {
	rules   ArtifactRules
	max     int64
	total   int64 // bytes still allowed
	dst     int
	done    []Exported
	refused []Refused
}

func (e *exporter) refuse(rel, reason string) {
	e.refused = append(e.refused, Refused{Path: rel, Reason: reason})
}

func (e *exporter) visit(n *node) error {
	if n.typ() == unix.S_IFDIR || !matchAny(e.rules.Include, n.rel) {
		return nil
	}
	switch n.typ() {
	case unix.S_IFLNK:
		e.refuse(n.rel, ReasonSymlink)
	case unix.S_IFIFO:
		e.refuse(n.rel, ReasonFIFO)
	case unix.S_IFSOCK:
		e.refuse(n.rel, ReasonSocket)
	case unix.S_IFCHR, unix.S_IFBLK:
		e.refuse(n.rel, ReasonDevice)
	case unix.S_IFREG:
		return e.file(n)
	default:
		e.refuse(n.rel, ReasonDevice)
	}
	return nil
}

func (e *exporter) file(n *node) error {
	switch {
	case n.st.Nlink > 1:
		e.refuse(n.rel, ReasonHardLink)
		return nil
	case n.st.Size > e.max:
		e.refuse(n.rel, ReasonTooLarge)
		return nil
	case n.st.Size > e.total:
		e.refuse(n.rel, ReasonTotal)
		return nil
	}
	f, st, err := openFileAt(n.dir, n.name, &n.st)
	if errors.Is(err, ErrUnsafeEntry) || err == nil && st.Nlink > 1 {
		if f != nil {
			f.Close()
		}
		e.refuse(n.rel, ReasonChanged)
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %q: %w", n.rel, err)
	}
	defer f.Close()
	return e.copy(n.rel, f, min(e.max, e.total))
}

// copy writes f to rel beneath dst, reading at most limit bytes: a file
// that grew past it while we copied is removed and refused.
func (e *exporter) copy(rel string, f *os.File, limit int64) error {
	dir, base := splitRel(rel)
	pfd, err := openDirBeneath(e.dst, dir, true, 0o700)
	if err != nil {
		e.refuse(rel, ReasonBlocked)
		return nil
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EEXIST) {
		e.refuse(rel, ReasonExists)
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating %q: %w", rel, err)
	}
	out := os.NewFile(uintptr(fd), rel)
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(f, limit+1))
	if err == nil {
		err = unix.Fchmod(fd, 0o644) // umask may have narrowed it; artifacts are for the user to read
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil || n > limit {
		unix.Unlinkat(pfd, base, 0)
		if err != nil {
			return fmt.Errorf("copying %q: %w", rel, err)
		}
		e.refuse(rel, ReasonChanged)
		return nil
	}
	e.total -= n
	e.done = append(e.done, Exported{Path: rel, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

func matchAny(patterns []string, rel string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if matchGlob(strings.Split(p, "/"), strings.Split(rel, "/")) {
			return true
		}
	}
	return false
}

// matchGlob matches path components against pattern components, "**"
// standing for any number of components.
func matchGlob(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchGlob(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
