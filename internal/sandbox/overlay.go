package sandbox

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// checkOverlay rejects an InputOverlay the kernel would refuse or that
// would let the layers see each other. The kernel checks most of this
// too; checking first gives an error that names the paths.
func (s *Spec) checkOverlay() error {
	o := s.InputOverlay
	if o == nil {
		return nil
	}
	if s.Input == "" {
		return errors.New("input overlay without an input: the input is its lower layer")
	}
	for _, p := range []string{o.Upper, o.Work} {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return fmt.Errorf("input overlay dir %q: must be absolute and clean, and not /", p)
		}
	}
	pairs := [][2]string{{o.Upper, o.Work}, {o.Upper, s.Input}, {o.Work, s.Input}}
	for _, pr := range pairs {
		if within(pr[0], pr[1]) || within(pr[1], pr[0]) {
			return fmt.Errorf("input overlay: %s and %s overlap; the upper, work and input dirs must be separate trees", pr[0], pr[1])
		}
	}
	_, up, work := layerRoot(o.Upper, o.Work)
	// The init names them in overlayfs's option string, where these
	// characters separate or escape options.
	if strings.ContainsAny(up+work, ",:\\") {
		return fmt.Errorf("input overlay dirs %s and %s: the parts below their common parent may not contain ',', ':' or '\\'", o.Upper, o.Work)
	}
	return nil
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// layerRoot returns the deepest directory holding both clean absolute
// paths a and b (neither inside the other), and their paths relative to it.
// Overlayfs wants upper and work on one mount, so the sandbox mounts that
// directory and names the two beneath it.
func layerRoot(a, b string) (root, relA, relB string) {
	root = path.Dir(a)
	for !within(b, root) {
		root = path.Dir(root)
	}
	rel := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, root), "/") }
	return root, rel(a), rel(b)
}
