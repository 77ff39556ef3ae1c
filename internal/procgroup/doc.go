// Package procgroup signals the process group of a child that mcpbox (or a
// test) started with Setpgid, and never a group that is not its own.
//
// kill(-pgid, sig) names a group by a number. Once the leader has been
// reaped and the group has no member left, that number is free: the next
// process the kernel gives the pid to and that leads a group of its own (a
// sandbox init, timeout(1), a shell job) is hit instead. On a host whose
// pid_max is 32768 and which forks thousands of processes a minute, a pid
// comes round again within minutes, so a cleanup that kills "its" group
// after the leader ended kills some other program's processes.
//
// A Group holds a pidfd of the leader, opened while the leader was still
// unreaped, and signals with pidfd_send_signal(PIDFD_SIGNAL_PROCESS_GROUP)
// (Linux 6.9+): the kernel resolves the group from the leader's struct pid,
// not its number, so the signal reaches the members that are left
// (background children of a reaped leader included) and nothing once they
// are gone: a later process with the same number has another struct pid.
// On older kernels it falls back to kill(-pid) only while the leader is
// still unreaped (waitid WNOWAIT on the pidfd), which leaves a window of
// one reap between the check and the kill.
package procgroup
