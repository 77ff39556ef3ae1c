package builtin

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// wpath is a client path split into its root and the part beneath it.
// Only the root name and rel ever appear in messages; dir is the host
// directory and stays internal.
type wpath struct {
	root string // "input" or "output"
	dir  string // host directory of the root
	rel  string // beneath the root, slash-separated, "." for the root itself
}

func (p wpath) String() string {
	if p.rel == "." {
		return p.root
	}
	return p.root + "/" + p.rel
}

// join returns the path of name inside directory p.
func (p wpath) join(name string) wpath {
	q := p
	if p.rel == "." {
		q.rel = name
	} else {
		q.rel = p.rel + "/" + name
	}
	return q
}

var errNoRoot = errors.New(`path must start with "input/" or "output/" (or /workspace/input/, /workspace/output/)`)

// resolve parses a client path. It does not clean ".." away: the kernel
// resolves the rest beneath the root and refuses escapes, so what the
// client asked for is what gets checked.
func (s *server) resolve(p string) (wpath, error) {
	if len(p) > maxPathLen {
		return wpath{}, errors.New("path too long")
	}
	if strings.ContainsRune(p, 0) {
		return wpath{}, errors.New("path contains a NUL byte")
	}
	// The userspace resolver holds a descriptor per component and
	// creates parents one by one: keep paths to a sane depth.
	if strings.Count(p, "/") > maxComponents {
		return wpath{}, fmt.Errorf("path too deep (max %d components)", maxComponents)
	}
	switch {
	case strings.HasPrefix(p, "/workspace/"):
		p = strings.TrimPrefix(p, "/workspace/")
	case strings.HasPrefix(p, "/"):
		return wpath{}, errNoRoot
	}
	p = strings.TrimPrefix(p, "./")
	first, rest, _ := strings.Cut(p, "/")
	var dir string
	switch first {
	case "input":
		dir = s.o.Input
	case "output":
		dir = s.o.Output
	default:
		return wpath{}, errNoRoot
	}
	if dir == "" {
		return wpath{}, fmt.Errorf("%s is not configured in this workspace", first)
	}
	rest = strings.Trim(rest, "/")
	if rest == "" {
		rest = "."
	}
	w := wpath{root: first, dir: dir, rel: rest}
	if s.hidden(w) {
		return wpath{}, fmt.Errorf("%s is not shown in input/: it is where output/ lives (or another writable mount); use output/", w)
	}
	return w, nil
}

// hidden reports whether p is or lies beneath one of Options.InputHidden.
// The check is by name, for a clear error; the sandbox's empty mount over
// the dir is what hides it from a path spelled otherwise.
func (s *server) hidden(p wpath) bool {
	if p.root != "input" {
		return false
	}
	rel := path.Clean(p.rel)
	for _, h := range s.o.InputHidden {
		if rel == h || strings.HasPrefix(rel, h+"/") {
			return true
		}
	}
	return false
}

// resolveWrite is resolve for writes: the path must be a file under
// output, or under input when it is writable (an overlay).
func (s *server) resolveWrite(p string) (wpath, error) {
	w, err := s.resolve(p)
	if err != nil {
		return wpath{}, err
	}
	if w.root != "output" && !(w.root == "input" && s.o.InputWritable) {
		return wpath{}, fmt.Errorf("%s is read-only; write under output/", w.root)
	}
	if base := path.Base(w.rel); base == "." || base == ".." || base == "/" {
		return wpath{}, fmt.Errorf("%s: not a file path", w)
	}
	return w, nil
}

// roots lists the configured roots, for calls that take no path.
func (s *server) roots() []wpath {
	var out []wpath
	if s.o.Input != "" {
		out = append(out, wpath{root: "input", dir: s.o.Input, rel: "."})
	}
	if s.o.Output != "" {
		out = append(out, wpath{root: "output", dir: s.o.Output, rel: "."})
	}
	return out
}

// matchGlob matches a glob against the base name, or against the path
// relative to the listed directory when the glob contains a slash.
func matchGlob(glob, rel string) bool {
	if glob == "" {
		return true
	}
	subject := path.Base(rel)
	if strings.Contains(glob, "/") {
		subject = rel
	}
	ok, err := path.Match(glob, subject)
	return err == nil && ok
}

// checkGlob rejects malformed globs up front, so a typo is reported
// instead of silently matching nothing.
func checkGlob(glob string) error {
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", glob, err)
	}
	return nil
}
