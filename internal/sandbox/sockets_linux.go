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

// socketDepth is how deep refuseSockets looks: the top level and the
// directories in it, where agents keep theirs ($HOME/.gnupg/S.gpg-agent,
// $HOME/.ssh/agent.sock). A whole tree can be large, and a socket may
// appear after the check anyway (see the threat model).
const socketDepth = 2

// refuseSockets fails if src, the opened source of m, is a unix socket or
// a directory that holds one within socketDepth levels.
func refuseSockets(src int, m Mount, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return socketError(m, m.Source)
	case unix.S_IFDIR:
	default:
		return nil
	}
	sock, err := findSocket(src, m.Source, socketDepth)
	if err != nil {
		return &StartError{Code: exitSetup, Err: fmt.Errorf("listing mount source %s to look for unix sockets: %w", m.Source, err)}
	}
	if sock != "" {
		return socketError(m, sock)
	}
	return nil
}

// findSocket returns the path of a unix socket in the directory dirfd
// (named path) or in its subdirectories down to depth levels, or "". A
// subdirectory it may not read is skipped: the workload, of the same
// uid and groups (or of none, as root's sandboxes), cannot list it either.
func findSocket(dirfd int, path string, depth int) (string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	dir := os.NewFile(uintptr(fd), path)
	defer dir.Close()
	var subdirs []string
	for {
		entries, err := dir.ReadDir(1024)
		for _, e := range entries {
			switch {
			case e.Type()&os.ModeSocket != 0:
				return filepath.Join(path, e.Name()), nil
			case e.IsDir() && depth > 1:
				subdirs = append(subdirs, e.Name())
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
	}
	for _, name := range subdirs {
		sub, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // gone since it was listed
		}
		if err != nil {
			return "", err
		}
		sock, err := findSocket(sub, filepath.Join(path, name), depth-1)
		unix.Close(sub)
		if errors.Is(err, unix.EACCES) {
			continue
		}
		if sock != "" || err != nil {
			return sock, err
		}
	}
	return "", nil
}

func socketError(m Mount, sock string) error {
	return &StartError{Code: exitSetup, Err: fmt.Errorf(
		"refusing to mount %s on %s: the sandbox could connect to the unix socket %s (landlock ABI %d; ABI %d restricts it); mount a directory without it: %w",
		m.Source, m.Target, sock, landlock.ABI(), resolveUnixABI, ErrMountSocket)}
}
