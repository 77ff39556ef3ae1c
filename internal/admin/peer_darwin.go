package admin

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION (sys/ucred.h): the only layout of
// struct xucred this code reads.
const xucredVersion = 0

// peerCred is the LOCAL_PEERCRED of conn (the peer's effective uid when
// it connected) and its LOCAL_PEERPID.
func peerCred(conn *net.UnixConn) (peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var cred *unix.Xucred
	var pid int
	var cerr, perr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	}); err != nil {
		return peer{}, err
	}
	if cerr != nil {
		return peer{}, cerr
	}
	if perr != nil {
		return peer{}, perr
	}
	if cred.Version != xucredVersion {
		return peer{}, fmt.Errorf("peer credentials of unknown version %d", cred.Version)
	}
	return peer{uid: cred.Uid, pid: pid}, nil
}

// sameUserNS is true: macOS has no user namespaces, and no local
// sandbox runs there (sandbox.ErrNeedsLinux), so a process of the
// gateway's uid is that user's, not a sandbox of the gateway.
func sameUserNS(int) bool { return true }
