package admin

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"mcpbox/internal/instance"
)

// errPermission is what a refused peer is told.
var errPermission = errors.New("permission denied")

// listenPrivate listens on the unix socket path, replacing what is there,
// with no access for others from the start (umask) and mode 0600. what
// names the socket in errors.
func listenPrivate(path, what string) (*net.UnixListener, error) {
	os.Remove(path)
	// The umask is process-wide: the window is the one listen.
	old := unix.Umask(0o077)
	ln, err := instance.Listen(path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("%s socket: %w", what, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("%s socket: %w", what, err)
	}
	return ln, nil
}

// checkPeer admits the gateway's own user and root, and returns the
// peer's uid (who decided, for the audit).
func checkPeer(conn *net.UnixConn) (uint32, error) {
	cred, err := instance.PeerOf(conn)
	if err != nil {
		return 0, err
	}
	if cred.UID != 0 && int(cred.UID) != os.Getuid() {
		return 0, errPermission
	}
	// Root, seen from an unprivileged gateway, is no sandbox of it (they run
	// as the gateway's user); and such a gateway may not read root's
	// namespaces below.
	if cred.UID == 0 && os.Getuid() != 0 {
		return 0, nil
	}
	// A sandbox of this gateway runs as its user too (unprivileged mode),
	// but in a user namespace of its own: it may not steer the gateway.
	if !instance.SameUserNS(cred.PID) {
		return 0, errPermission
	}
	return cred.UID, nil
}

// peerListener accepts only connections checkPeer admits.
type peerListener struct{ *net.UnixListener }

func (l peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if _, err := checkPeer(c); err != nil {
			c.Close()
			continue
		}
		return c, nil
	}
}

// ownedByMe reports whether fi belongs to this user or root.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (st.Uid == 0 || int(st.Uid) == os.Geteuid())
}
