package landlock

import (
	"fmt"
	"strings"
)

// Access is a set of Landlock filesystem rights (LANDLOCK_ACCESS_FS_*). The
// values are the kernel's; they are defined here rather than taken from
// x/sys/unix so that policies can be built and checked on any platform.
type Access uint64

// Single filesystem rights, in kernel bit order. The comment names the first
// ABI that knows the right; on older kernels it is neither granted nor denied.
const (
	Execute     Access = 1 << 0  // execve a file (ABI 1)
	WriteFile   Access = 1 << 1  // open a file for writing (ABI 1)
	ReadFile    Access = 1 << 2  // open a file for reading (ABI 1)
	ReadDir     Access = 1 << 3  // open a directory or list its entries (ABI 1)
	RemoveDir   Access = 1 << 4  // remove an empty directory or rename one away (ABI 1)
	RemoveFile  Access = 1 << 5  // unlink or rename away a file (ABI 1)
	MakeChar    Access = 1 << 6  // create a character device (ABI 1)
	MakeDir     Access = 1 << 7  // create a directory (ABI 1)
	MakeReg     Access = 1 << 8  // create a regular file (ABI 1)
	MakeSock    Access = 1 << 9  // create a unix socket file (ABI 1)
	MakeFifo    Access = 1 << 10 // create a named pipe (ABI 1)
	MakeBlock   Access = 1 << 11 // create a block device (ABI 1)
	MakeSym     Access = 1 << 12 // create a symbolic link (ABI 1)
	Refer       Access = 1 << 13 // link or rename a file into a different directory (ABI 2)
	Truncate    Access = 1 << 14 // truncate(2), ftruncate(2), O_TRUNC (ABI 3)
	IoctlDev    Access = 1 << 15 // ioctl(2) on character and block devices (ABI 5)
	ResolveUnix Access = 1 << 16 // connect to a pathname unix socket (ABI 9)
)

// Convenient groups of rights for path-beneath rules.
const (
	// Read lets a process open files for reading and list directories.
	Read = ReadFile | ReadDir

	// Write lets a process change a tree: write, truncate, create and
	// remove any kind of entry, and move entries in and out of it (Refer;
	// a move needs Refer on both the source and the destination). Write
	// does not include Read: a tree that must also be read needs Read|Write.
	Write = WriteFile | RemoveDir | RemoveFile | MakeChar | MakeDir | MakeReg |
		MakeSock | MakeFifo | MakeBlock | MakeSym | Refer | Truncate

	// Exec lets a process execute files. Executing a dynamically linked
	// program also needs Exec on its ELF interpreter (ld.so) and Read on
	// its libraries.
	Exec = Execute

	// All is every right this package knows.
	All Access = 1<<17 - 1
)

// fileAccess are the rights that make sense on a non-directory; the kernel
// rejects a rule on a file that grants anything else (EINVAL).
const fileAccess = Execute | WriteFile | ReadFile | Truncate | IoctlDev | ResolveUnix

var accessNames = [...]string{
	"execute", "write_file", "read_file", "read_dir", "remove_dir",
	"remove_file", "make_char", "make_dir", "make_reg", "make_sock",
	"make_fifo", "make_block", "make_sym", "refer", "truncate", "ioctl_dev",
	"resolve_unix",
}

// String lists the rights by their kernel names, joined by "|".
func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var names []string
	for i, name := range accessNames {
		if a&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if rest := a &^ All; rest != 0 {
		names = append(names, fmt.Sprintf("%#x", uint64(rest)))
	}
	return strings.Join(names, "|")
}

// Network rights (LANDLOCK_ACCESS_NET_*, ABI 4) and scopes (ABI 6).
const (
	netBindTCP    = 1 << 0
	netConnectTCP = 1 << 1

	scopeAbstractUnix = 1 << 0
	scopeSignal       = 1 << 1
)

// handledFS is the set of filesystem rights the given ABI can restrict.
func handledFS(abi int) Access {
	var a Access
	if abi >= 1 {
		a |= Execute | WriteFile | ReadFile | ReadDir | RemoveDir | RemoveFile |
			MakeChar | MakeDir | MakeReg | MakeSock | MakeFifo | MakeBlock | MakeSym
	}
	if abi >= 2 {
		a |= Refer
	}
	if abi >= 3 {
		a |= Truncate
	}
	if abi >= 5 {
		a |= IoctlDev
	}
	if abi >= 9 {
		a |= ResolveUnix
	}
	return a
}

// ruleAccess is what a rule may grant under abi: the rights the ABI knows,
// narrowed to file rights when the rule is not on a directory.
func ruleAccess(a Access, abi int, isDir bool) Access {
	a &= handledFS(abi)
	if !isDir {
		a &= fileAccess
	}
	return a
}

// rulesetAttrSize is the size of struct landlock_ruleset_attr as the given
// ABI knows it: handled_access_fs, then handled_access_net (ABI 4), then
// scoped (ABI 6). Older kernels reject a larger struct with E2BIG if the
// extra fields are non-zero, so the size names exactly what we use.
func rulesetAttrSize(abi int) uintptr {
	switch {
	case abi >= 6:
		return 24
	case abi >= 4:
		return 16
	default:
		return 8
	}
}
