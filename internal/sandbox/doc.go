// Package sandbox runs one command in a fresh Linux sandbox: new user, mount,
// pid, net, ipc, uts and cgroup namespaces, a read-only root built by
// pivot_root from a few host binds (or from an unpacked image tree,
// Spec.Root, in place of the host's /usr, /lib and /etc; see
// initproc/rootfs_image_linux.go), an empty network namespace, cgroup
// limits, and — for the workload itself — a second, nested user namespace,
// empty capability sets, no_new_privs, Landlock and a seccomp filter.
//
// The process tree is:
//
//	mcpbox (host)              Run: cgroup, control socket, timeout, signals,
//	                           size of the workspace dirs (disksize_linux.go)
//	└─ mcpbox init (pid 1)     namespaces, rootfs, reaper; see initproc
//	   └─ CMD                  the workload: its own user namespace (uid
//	                           1000 mapped 1:1 to the init's), no
//	                           capabilities, no_new_privs, Landlock,
//	                           seccomp; a pids cgroup of its own, nested
//	                           in the sandbox's (the init keeps its
//	                           threads: initTasks), RLIMIT_NPROC without
//	                           a cgroup
//
// The init is this binary re-executed with a hidden argument (runc's "init"
// trick): the program's main must call [Main] first. On amd64 its clone
// shares the host's address space until its execve (CLONE_VM|CLONE_VFORK),
// and the child writes its own id maps (vfork_unsafe.go): os/exec forks,
// copying the host's page tables, whenever it makes a user namespace. It puts the walls up
// on its own OS thread and forks the workload from it into the nested user
// namespace, which owns none of the sandbox's other namespaces: no
// capability the workload could come by there counts over the sandbox's
// mounts, network or processes (initproc: workload_linux.go, fork_unsafe.go).
//
// The init need not be mcpbox itself: a lean init binary, [InitName]
// (cmd/mcpbox-init), next to the executable is started instead when it
// comes from the very same build (module version or VCS revision, Go
// version, build settings) and is owned and writable only by root or the
// executable's owner; it is opened once and executed through that
// descriptor. Anything less falls back to re-executing mcpbox
// (initbin_linux.go). It saves the gateway's package inits on every start.
//
// Start may be cut in two (warm_linux.go): [Prepare] builds everything but
// the command (init, namespaces, cgroup, root, loopback) and forks the
// workload's process ahead, exactly as a cold start forks it, with every
// wall of its own up (no_new_privs, Landlock, capabilities, its user
// namespace, process limit, seccomp); that process waits on a socket.
// [Prepared.Start] sends it the command, environment, directory and
// stdio; it looks the command up as the init would, changes directory
// and executes it. Every wall is the Spec's, so a Spec is only started in
// a sandbox prepared from an
// equal one ([Prepared.Matches]: all but Args, Env, Dir and the secrets;
// a Spec with an ID or a network is never prepared). [Pool] keeps a
// bounded number prepared for serve's warm pool, refills in the
// background, passes over one whose init died while it waited, and
// starts cold when none matches.
//
// With a credential-injecting Network, the proxy's CA and trust bundle
// are bound into the sandbox at TrustCAPath and TrustBundlePath and over
// the system bundle: the host's, or in an image root every usual bundle
// path the image resolves to, links followed inside the root
// (trust_linux.go).
// A Spec is plain data; [Compile]-like conversion from config lives with the
// caller. Nothing here parses MCP.
package sandbox
