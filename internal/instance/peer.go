package instance

import (
	"net"
	"os"
	"syscall"
)

// Peer is who is at the other end of a unix socket connection
// (peer_*.go: how the kernel tells differs by system).
type Peer struct {
	UID uint32
	PID int
}

// TrustedUID reports whether a gateway running as uid may answer for the
// state dir: it is this user or root, or (for root) the dir's owner.
func TrustedUID(uid uint32, dir string) bool {
	me := os.Geteuid()
	if uid == 0 || int(uid) == me {
		return true
	}
	fi, err := os.Stat(dir)
	if err != nil || me != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uid
}

// Serves reports whether the process listening at the other end of conn
// may be an instance of stateDir: TrustedUID's user, outside every
// sandbox. In unprivileged mode a sandbox runs as its gateway's user, but
// in a user namespace of its own; a repository's config may name as its
// state_dir a directory a sandbox writes (its output), where a process in
// it could pose as a gateway to the admin commands. Root, seen by another
// user, is let be: that user may not read root's namespaces, and no
// sandbox of its gateways runs as root.
func Serves(conn net.Conn, stateDir string) bool {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return false
	}
	p, err := PeerOf(uc)
	if err != nil || !TrustedUID(p.UID, stateDir) {
		return false
	}
	if p.UID == 0 && os.Geteuid() != 0 {
		return true
	}
	return SameUserNS(p.PID)
}
