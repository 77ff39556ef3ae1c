// Package sandbox runs one command in a fresh Linux sandbox: new user, mount,
// pid, net, ipc, uts and cgroup namespaces, a read-only root built by
// pivot_root from a few host binds, an empty network namespace, cgroup
// limits, and — for the workload itself — a second, nested user namespace,
// empty capability sets, no_new_privs, Landlock and a seccomp filter.
//
// The process tree is:
//
//	mcpbox (host)              Run: cgroup, control socket, timeout, signals,
//	                           size of the workspace dirs (disksize_linux.go)
//	└─ mcpbox init (pid 1)     namespaces, rootfs, reaper; see init_linux.go
//	   └─ CMD                  the workload: uid 1000, no capabilities,
//	                           no_new_privs, Landlock, seccomp
//
// The init is this binary re-executed with a hidden argument (runc's "init"
// trick): the program's main must call [Main] first. It puts the walls up
// on its own OS thread and forks the workload from it (workload_linux.go).
// A Spec is plain data; [Compile]-like conversion from config lives with the
// caller. Nothing here parses MCP.
package sandbox
