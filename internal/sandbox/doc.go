// Package sandbox runs one command in a fresh Linux sandbox: new user, mount,
// pid, net, ipc, uts and cgroup namespaces, a read-only root built by
// pivot_root from a few host binds (or from an unpacked image tree,
// Spec.Root, in place of the host's /usr, /lib and /etc; see
// rootfs_image_linux.go), an empty network namespace, cgroup
// limits, and — for the workload itself — a second, nested user namespace,
// empty capability sets, no_new_privs, Landlock and a seccomp filter.
//
// The process tree is:
//
//	mcpbox (host)              Run: cgroup, control socket, timeout, signals,
//	                           size of the workspace dirs (disksize_linux.go)
//	└─ mcpbox init (pid 1)     namespaces, rootfs, reaper; see init_linux.go
//	   └─ CMD                  the workload: its own user namespace (uid
//	                           1000 mapped 1:1 to the init's), no
//	                           capabilities, no_new_privs, Landlock,
//	                           seccomp, RLIMIT_NPROC without a cgroup
//
// The init is this binary re-executed with a hidden argument (runc's "init"
// trick): the program's main must call [Main] first. It puts the walls up
// on its own OS thread and forks the workload from it into the nested user
// namespace, which owns none of the sandbox's other namespaces: no
// capability the workload could come by there counts over the sandbox's
// mounts, network or processes (workload_linux.go, fork_unsafe.go).
// A Spec is plain data; [Compile]-like conversion from config lives with the
// caller. Nothing here parses MCP.
package sandbox
