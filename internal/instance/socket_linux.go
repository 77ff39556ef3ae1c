package instance

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSockPath is the longest path a unix socket address holds (sun_path
// is 108 bytes with its NUL). A project's state dir under a long home or
// $XDG_STATE_HOME easily makes STATE/instances/PID.sock longer.
const maxSockPath = 107

// viaDir calls f with path, or, if path is too long for a socket
// address, with /proc/self/fd/N/BASE, N an O_PATH descriptor of path's
// directory held during f.
func viaDir(path string, f func(string) error) error {
	if len(path) <= maxSockPath {
		return f(path)
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the socket's dir: %w", err)
	}
	defer unix.Close(fd)
	short := fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path))
	if len(short) > maxSockPath {
		return fmt.Errorf("socket name %s too long", filepath.Base(path))
	}
	return f(short)
}
