package builtin

import (
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// kernelOpenat2 is cleared the first time openat2 answers ENOSYS, as it
// does inside an mcpbox sandbox, whose seccomp filter cannot read
// openat2's mode and so refuses the call. Tests clear it to exercise the
// userspace resolver.
var kernelOpenat2 = func() *atomic.Bool { var b atomic.Bool; b.Store(true); return &b }()

// maxLinks matches the kernel's limit on symlinks in one lookup.
const maxLinks = 40

// openBeneath is the userspace twin of openat2 with RESOLVE_BENEATH,
// RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV (and RESOLVE_NO_SYMLINKS
// for single names). It walks rel one component at a time from dirfd,
// holding an fd for every directory it entered: ".." pops that stack
// instead of asking the kernel, so a concurrent rename cannot move the
// walk outside, and ".." at the bottom is an escape. Symlinks are read
// and their targets walked the same way; an absolute target is an escape,
// as it is for RESOLVE_BENEATH. Every step opens with O_NOFOLLOW, so a
// symlink swapped in after it was checked is never followed by the kernel.
func openBeneath(dirfd int, rel string, flags int, mode uint32, resolve uint64) (int, error) {
	switch {
	case rel == "":
		return -1, unix.ENOENT
	case strings.HasPrefix(rel, "/"):
		return -1, unix.EXDEV
	}
	var rootSt unix.Stat_t
	if err := unix.Fstat(dirfd, &rootSt); err != nil {
		return -1, err
	}
	if resolve&unix.RESOLVE_NO_SYMLINKS != 0 {
		if strings.Contains(rel, "/") || rel == ".." {
			return -1, unix.EXDEV // only single names are resolved this way here
		}
		return openFinal(dirfd, rel, flags, mode, rootSt.Dev)
	}
	var stack []int // directories entered, all owned here
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	cur := func() int {
		if len(stack) == 0 {
			return dirfd
		}
		return stack[len(stack)-1]
	}
	comps := strings.Split(rel, "/")
	links := 0
	for len(comps) > 0 {
		name := comps[0]
		comps = comps[1:]
		last := len(comps) == 0
		switch name {
		case "", ".":
			if last {
				return openFinal(cur(), ".", flags, mode, rootSt.Dev)
			}
			continue
		case "..":
			if len(stack) == 0 {
				return -1, unix.EXDEV
			}
			unix.Close(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
			if last {
				return openFinal(cur(), ".", flags, mode, rootSt.Dev)
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(cur(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if last {
				return openFinal(cur(), name, flags, mode, rootSt.Dev) // may create it
			}
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK && (!last || flags&unix.O_NOFOLLOW == 0) {
			if links++; links > maxLinks {
				return -1, unix.ELOOP
			}
			target, err := readlinkat(cur(), name)
			if err != nil {
				return -1, err
			}
			if strings.HasPrefix(target, "/") {
				return -1, unix.EXDEV
			}
			comps = append(strings.Split(target, "/"), comps...)
			continue
		}
		if st.Dev != rootSt.Dev {
			return -1, unix.EXDEV
		}
		if last {
			return openFinal(cur(), name, flags, mode, rootSt.Dev)
		}
		fd, err := unix.Openat(cur(), name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		stack = append(stack, fd)
	}
	return openFinal(cur(), ".", flags, mode, rootSt.Dev)
}

// openFinal opens one name in dir without following a symlink there, and
// refuses a result on another device (RESOLVE_NO_XDEV).
func openFinal(dir int, name string, flags int, mode uint32, dev uint64) (int, error) {
	fd, err := unix.Openat(dir, name, flags|unix.O_NOFOLLOW, mode)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Dev != dev {
		unix.Close(fd)
		return -1, unix.EXDEV
	}
	return fd, nil
}

func readlinkat(dir int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}
