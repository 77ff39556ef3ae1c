//go:build !linux

package landlock

// ABI returns 0: Landlock exists only on Linux.
func ABI() int { return 0 }

// Restrict returns ErrUnsupported: Landlock exists only on Linux.
func Restrict(p Policy) (abi int, err error) {
	return 0, ErrUnsupported
}

// Ruleset returns ErrUnsupported: Landlock exists only on Linux.
func Ruleset(p Policy) (fd, abi int, err error) {
	return -1, 0, ErrUnsupported
}
