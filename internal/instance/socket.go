package instance

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// maxSockPath is the longest path a unix socket address holds (sun_path
// is 108 bytes with its NUL). A project's state dir under a long home or
// $XDG_STATE_HOME easily makes STATE/instances/PID.sock longer.
const maxSockPath = 107

// Listen listens on the unix socket at path, of any length. Unlinking on
// close is off (a long path is bound through a directory fd that is gone
// by then): the caller removes path.
func Listen(path string) (*net.UnixListener, error) {
	var ln *net.UnixListener
	err := viaDir(path, func(p string) error {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			return err
		}
		l.SetUnlinkOnClose(false)
		ln = l
		return nil
	})
	return ln, err
}

// Dial connects to the unix socket at path, of any length.
func Dial(path string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := viaDir(path, func(p string) error {
		var err error
		c, err = net.DialTimeout("unix", p, timeout)
		return err
	})
	return c, err
}

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
