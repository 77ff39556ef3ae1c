// Package landlock is a small binding to the Linux Landlock LSM, the sandbox's
// second wall behind the mount namespace.
//
// The mount namespace decides what a sandboxed process can see; Landlock
// decides what it may do with what it sees. Even if a bind mount ends up
// writable by mistake, or a path leaks in through /proc, the Landlock domain
// still denies writes outside the granted directories and execution of files
// outside the granted executable trees (by default /workspace/output and /tmp
// are writable but not executable). On ABI 6 and later the domain also scopes
// signals and abstract unix sockets, so a sandboxed process cannot signal or
// connect to processes outside its sandbox even where namespaces would allow it.
//
// [Restrict] handles every filesystem right the running kernel's ABI knows,
// so anything a [Policy] does not grant is denied. Rights the ABI lacks are
// dropped (best effort); [Policy.Unenforced] lists what that leaves open so
// doctor and the audit log can say so.
//
// # Thread scope
//
// landlock_restrict_self(2) restricts only the calling thread, and a Go
// program runs on many threads. The caller must call runtime.LockOSThread,
// set no_new_privs on that thread, call [Restrict] and then exec the sandboxed
// program from the same goroutine, never unlocking the thread: a goroutine
// that exits while locked takes its thread with it, so no restricted thread
// returns to the runtime's pool and no unrestricted thread runs the exec.
// Domains are inherited across fork and execve and can only be tightened.
//
// The package uses raw syscalls (no cgo, no dependency beyond x/sys). On other
// platforms [ABI] returns 0 and [Restrict] returns [ErrUnsupported].
package landlock
