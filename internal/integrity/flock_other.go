//go:build !unix

package integrity

import (
	"errors"
	"fmt"
)

// acquireFlock fails: without flock two writers could lose each other's
// pins, and the lock file is not worth that risk.
func acquireFlock(path string) (release func(), err error) {
	return nil, fmt.Errorf("locking %s: %w", path, errors.ErrUnsupported)
}
