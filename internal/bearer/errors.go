package bearer

import "errors"

var (
	// ErrUnsafeFile: the token file is not a regular file of this user
	// with mode 0600 (or stricter), or a symlink.
	ErrUnsafeFile = errors.New("unsafe token file")
	// ErrBadToken: the file holds no token of the expected shape.
	ErrBadToken = errors.New("malformed token")
)
