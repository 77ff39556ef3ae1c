package instance

import (
	"net"
	"time"
)

// Listen listens on the unix socket at path, of any length on Linux
// (viaDir; elsewhere up to maxSockPath bytes). Unlinking on
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

// Dial connects to the unix socket at path, of any length on Linux
// (viaDir; elsewhere up to maxSockPath bytes).
func Dial(path string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := viaDir(path, func(p string) error {
		var err error
		c, err = net.DialTimeout("unix", p, timeout)
		return err
	})
	return c, err
}
