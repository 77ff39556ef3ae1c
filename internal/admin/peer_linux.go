package admin

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// peerCred is the SO_PEERCRED of conn: who is at the other end.
func peerCred(conn *net.UnixConn) (peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, err
	}
	if cerr != nil {
		return peer{}, cerr
	}
	return peer{uid: cred.Uid, pid: int(cred.Pid)}, nil
}

// sameUserNS reports whether process pid is in this process's user
// namespace; false when either cannot be read.
func sameUserNS(pid int) bool {
	mine, err1 := os.Readlink("/proc/self/ns/user")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
	return err1 == nil && err2 == nil && mine == theirs
}
