package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"mcpbox/internal/landlock"
)

// resolveUnixABI is the first Landlock ABI that restricts connecting to
// pathname unix sockets (landlock.ResolveUnix). Below it, connect(2) to a
// socket file is no write and no mount flag stops it: a listening socket
// in a read-only mount (an ssh or gpg agent in $HOME, a docker socket) is
// reachable from the sandbox.
const resolveUnixABI = 9

// socketsGuarded reports whether Landlock keeps the workload from
// connecting to the sockets in its mounts; the workload's rules never
// grant ResolveUnix, and sockets it creates itself stay reachable.
func (sb *Sandbox) socketsGuarded() bool {
	return landlock.ABI() >= resolveUnixABI && !hasLayer(sb.Degraded, LayerLandlock)
}

// refuseSockets fails if src, the opened source of m, is a unix socket or
// a directory whose top level holds one. Sockets deeper down are not
// looked for: a whole tree can be large, and a socket may appear after
// the check anyway (see the threat model).
func refuseSockets(src int, m Mount, st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		return socketError(m, m.Source)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	fd, err := unix.Openat(src, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &StartError{Code: exitSetup, Err: fmt.Errorf("listing mount source %s to look for unix sockets: %w", m.Source, err)}
	}
	dir := os.NewFile(uintptr(fd), m.Source)
	defer dir.Close()
	for {
		entries, err := dir.ReadDir(1024)
		for _, e := range entries {
			if e.Type()&os.ModeSocket != 0 {
				return socketError(m, filepath.Join(m.Source, e.Name()))
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &StartError{Code: exitSetup, Err: fmt.Errorf("listing mount source %s to look for unix sockets: %w", m.Source, err)}
		}
	}
}

func socketError(m Mount, sock string) error {
	return &StartError{Code: exitSetup, Err: fmt.Errorf(
		"refusing to mount %s on %s: the sandbox could connect to the unix socket %s (landlock ABI %d; ABI %d restricts it); mount a directory without it: %w",
		m.Source, m.Target, sock, landlock.ABI(), resolveUnixABI, ErrMountSocket)}
}
