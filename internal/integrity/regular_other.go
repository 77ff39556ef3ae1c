//go:build !unix

package integrity

import (
	"fmt"
	"os"
)

// OpenRegular opens path for reading only if it is a regular file (see
// the unix build). Here the check and the open are two steps.
func OpenRegular(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return os.Open(path)
}
