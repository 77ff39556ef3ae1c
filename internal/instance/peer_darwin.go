package instance

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION (sys/ucred.h): the only layout of
// struct xucred this code reads.
const xucredVersion = 0

// PeerOf is the LOCAL_PEERCRED of conn (the peer's effective uid when
// it connected) and its LOCAL_PEERPID.
func PeerOf(conn *net.UnixConn) (Peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Xucred
	var pid int
	var cerr, perr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	if perr != nil {
		return Peer{}, perr
	}
	if cred.Version != xucredVersion {
		return Peer{}, fmt.Errorf("peer credentials of unknown version %d", cred.Version)
	}
	return Peer{UID: cred.Uid, PID: pid}, nil
}

// SameUserNS is true: macOS has no user namespaces, and no local
// sandbox runs there (sandbox.ErrNeedsLinux), so a process of the
// gateway's uid is that user's, not a sandbox of the gateway.
func SameUserNS(int) bool { return true }
