//go:build unix

package integrity

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// OpenRegular opens path for reading only if it is a regular file, and
// not through a symlink at its end: a project's lock file, or a lockfile
// kept beside it, that a cloned repository made a link to a file of the
// user's (~/.ssh/id_rsa) must not be read, and then echoed in a parse
// error or hashed in a mismatch; a fifo must not hang the reader. A
// missing file is fs.ErrNotExist.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symlink: mcpbox reads it only as a regular file", path)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}
