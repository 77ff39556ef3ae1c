//go:build !linux

package instance

import "fmt"

// maxSockPath is the longest path a unix socket address holds: sun_path
// is 104 bytes with its NUL on macOS and the BSDs.
const maxSockPath = 103

// viaDir calls f with path when it fits a socket address. A longer path
// is refused: without /proc/self/fd there is no short name for it that
// does not change the process's working directory, which other
// goroutines share.
func viaDir(path string, f func(string) error) error {
	if len(path) > maxSockPath {
		return fmt.Errorf("socket path %s is %d bytes, over the %d a unix socket address holds on this system: use a shorter state dir (--state-dir, $XDG_STATE_HOME)", path, len(path), maxSockPath)
	}
	return f(path)
}
