// Package seccomp builds and installs the seccomp filter (classic BPF, mode 2)
// that the sandbox applies to the workload right before execve.
//
// Threat model: the workload is untrusted code running as an unprivileged
// user in its own namespaces, behind Landlock. The filter removes kernel
// surface that such code never needs but that escapes and privilege
// escalations keep using: new namespaces (nested user namespaces reach
// nf_tables and other CAP_NET_ADMIN-gated code), mount and pivot_root,
// ptrace and cross-process memory access, the kernel keyring (not
// namespaced), bpf, perf, userfaultfd and io_uring (exploit primitives),
// module and kexec loading, and terminal input injection (TIOCSTI).
// Sockets are the one allow list: unix, TCP, UDP, ping and netlink route
// sockets only, so no raw or packet sockets, no unusual families (vsock is
// not isolated by network namespaces), no MPTCP (which Landlock's TCP rules
// do not cover) and no rarely used inet protocols whose modules load on
// demand (SCTP, DCCP, L2TP, UDP-Lite). Syscalls of a
// foreign ABI (i386, x32) kill the process, because their numbers would slip
// past a table written for the native one.
//
// The filter also refuses setuid and setgid bits in every mode the workload
// sets (chmod, fchmod, fchmodat, fchmodat2, creating opens, mknod), and
// answers openat2, whose mode it cannot read, with ENOSYS. Files the
// workload writes to an output directory belong on the host to the invoking
// user (to root, through an idmapped mount, when mcpbox runs as root): a
// setuid bit would plant a setuid binary of that user on the host, and the
// sandbox's nosuid mount only protects the sandbox's own view.
//
// The policy is a deny list on a default-allow base, not an allow list:
// the workloads are arbitrary Node, Python and Go programs, whose runtimes
// and native extensions probe new syscalls all the time; an allow list would
// break them on every runtime or kernel update, while the dangerous surface
// is small and stable. Socket() is the exception because its surface is
// the other way round: a handful of families and protocols cover every
// workload, and new ones keep appearing. Refusals return EPERM, which
// callers already handle, except where a runtime needs a different errno to
// fall back cleanly (clone3 and openat2: ENOSYS; a socket family, type or
// protocol outside the allow list: EAFNOSUPPORT, ESOCKTNOSUPPORT or
// EPROTONOSUPPORT, as from a kernel without it).
//
// [Program] builds the filter for the running architecture (amd64, arm64);
// [Install] loads it on the calling thread. Other platforms get
// [ErrUnsupported].
package seccomp
