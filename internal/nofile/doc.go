// Package nofile records the limit on open files (RLIMIT_NOFILE) this
// process started with, before Go raised it, so that the children it
// starts without os/exec get it back as os/exec's do.
//
// Go's syscall package raises the soft limit to the hard one (less one)
// when a program starts, and os/exec puts the original soft limit back in
// each child before execve, for programs that still use select(2)
// (go.dev/issue/46279). That original is kept in an unexported variable
// that the linker does not let other packages reach. This package reads
// the limit itself, in an initialiser that runs before syscall's: it
// imports nothing (its one system call is in assembly), and Go
// initialises, among the packages whose imports are all initialised, the
// one first in the lexical order of import paths (the Go spec, since Go
// 1.21), and mcpbox/... sorts before syscall. TestStartIsBeforeGoRaisedIt
// checks that it does.
//
// On architectures without the assembly (other than amd64 and arm64) and
// outside Linux, Start reports nothing and nothing is restored.
package nofile
