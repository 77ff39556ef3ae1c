package instance

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// PeerOf is the SO_PEERCRED of conn: who is at the other end.
func PeerOf(conn *net.UnixConn) (Peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	return Peer{UID: cred.Uid, PID: int(cred.Pid)}, nil
}

// SameUserNS reports whether process pid is in this process's user
// namespace; false when either cannot be read.
func SameUserNS(pid int) bool {
	mine, err1 := os.Readlink("/proc/self/ns/user")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
	return err1 == nil && err2 == nil && mine == theirs
}
