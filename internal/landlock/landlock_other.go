//go:build !linux

package landlock

// ABI returns 0: Landlock exists only on Linux.
func ABI() int { return 0 }

// Restrict returns ErrUnsupported: Landlock exists only on Linux.
func Restrict(p Policy) (abi int, err error) {
	return 0, ErrUnsupported
}

// Ruleset is a policy built ahead of the thread it restricts; there is none
// off Linux.
type Ruleset struct{}

// Build returns ErrUnsupported: Landlock exists only on Linux.
func Build(p Policy) (*Ruleset, error) { return nil, ErrUnsupported }

// RestrictSelf returns ErrUnsupported.
func (r *Ruleset) RestrictSelf() (abi int, err error) { return 0, ErrUnsupported }

// Close does nothing.
func (r *Ruleset) Close() {}
