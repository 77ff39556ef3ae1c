// Package tcppeer tells which user of this host is at the other end of a
// TCP connection from this host (over loopback, or from another of its
// addresses), as SO_PEERCRED tells it of a unix socket.
// A one-time login link (the dashboard's) or a login's redirect (OAuth's)
// arrives over loopback TCP, where any local user can connect, and the
// link itself may be read from another process's command line
// (xdg-open's, the browser's): the uid of the connecting socket is what
// tells the user's browser from another user's process.
//
// The uid is read from the kernel's socket tables (/proc/net/tcp and
// tcp6), which list every socket of the network namespace with its
// owner, whoever reads them.
package tcppeer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// ErrUnsupported: this system has no /proc/net/tcp (macOS), so a
// local peer's user cannot be told.
var ErrUnsupported = errors.New("this system does not tell a local peer's user")

// ErrNotFound: no socket of this network namespace is the other end, as
// for a connection relayed from another namespace or host.
var ErrNotFound = errors.New("the connecting socket is not in this host's socket table")

// tables are the socket tables read, each with whether it lists IPv6.
var tables = []struct {
	path string
	v6   bool
}{{"/proc/net/tcp", false}, {"/proc/net/tcp6", true}}

// UID is the owner of the socket at from that is connected to to: from
// and to are one TCP connection's ends as its accepting side sees them
// (the remote and the local address), both on this host.
func UID(from, to netip.AddrPort) (uint32, error) {
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	seen := false
	for _, t := range tables {
		if from.Addr().Is6() && !t.v6 || to.Addr().Is6() && !t.v6 {
			continue
		}
		f, err := os.Open(t.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		seen = true
		uid, ok, err := find(f, encode(from, t.v6), encode(to, t.v6))
		f.Close()
		if err != nil || ok {
			return uid, err
		}
	}
	if !seen {
		return 0, ErrUnsupported
	}
	return 0, ErrNotFound
}

// find reads a socket table (a header, then "sl local_address
// rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout
// inode ...") for the line of the socket at local connected to remote
// that a process holds: one no process holds any more (closed, in
// TIME_WAIT or an orphan's FIN_WAIT2) has inode 0 and is shown with uid
// 0, which is not root's.
func find(f *os.File, local, remote string) (uint32, bool, error) {
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[1] != local || fields[2] != remote || fields[9] == "0" {
			continue
		}
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("socket table: uid %q: %w", fields[7], err)
		}
		return uint32(uid), true, nil
	}
	return 0, false, sc.Err()
}

// encode writes ap as the tables do: the address as 32-bit words in the
// host's byte order, each as 8 hex digits (an IPv4 address in the IPv6
// table as ::ffff:a.b.c.d), a colon and the port as 4.
func encode(ap netip.AddrPort, v6 bool) string {
	var b []byte
	if v6 {
		a := ap.Addr().As16() // an IPv4 one mapped
		b = a[:]
	} else {
		a := ap.Addr().As4()
		b = a[:]
	}
	var s strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&s, "%08X", binary.NativeEndian.Uint32(b[i:i+4]))
	}
	fmt.Fprintf(&s, ":%04X", ap.Port())
	return s.String()
}

// SameUser refuses r when it came from a process of another user of
// this host: only this process's effective user and root (who can read
// this user's secrets anyway; WSL's localhost relay, which brings a
// Windows browser's connections, runs as root) pass. Any local user can
// connect from any of the host's addresses, not only loopback ones, so
// the peer's socket is looked up whatever its address: found, its owner
// decides; not found, a peer at one of this host's addresses is refused
// (its socket gone, or in another network namespace), and one elsewhere
// passes, as another machine's users are not this one's. On Linux
// without the socket tables (no /proc) every local peer is refused; on
// other systems (ErrUnsupported) the check is not made.
func SameUser(r *http.Request) error {
	remote, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return fmt.Errorf("peer address %q: %w", r.RemoteAddr, err)
	}
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if la == nil {
		return errors.New("the request does not say which local address it came to")
	}
	local, err := netip.ParseAddrPort(la.String())
	if err != nil {
		return fmt.Errorf("local address %q: %w", la, err)
	}
	uid, err := UID(remote, local)
	switch {
	case errors.Is(err, ErrUnsupported) && runtime.GOOS != "linux":
		return nil
	case err != nil && !thisHost(remote.Addr()):
		return nil
	case err != nil:
		return fmt.Errorf("cannot tell which user connected from %s: %w", remote, err)
	case uid != uint32(os.Geteuid()) && uid != 0:
		return &OtherUserError{UID: uid}
	}
	return nil
}

// thisHost reports whether a is a loopback address or one of this
// host's interfaces' (when they cannot be listed: true).
func thisHost(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// OtherUserError: the loopback peer is a process of another user.
type OtherUserError struct{ UID uint32 }

func (e *OtherUserError) Error() string {
	return fmt.Sprintf("connected from a process of uid %d, not of uid %d that runs mcpbox", e.UID, os.Geteuid())
}
