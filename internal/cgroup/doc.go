// Package cgroup puts one sandbox's processes into a cgroup of their own and
// limits their memory, process count and CPU time, on cgroup v2, cgroup v1 and
// the hybrid layout (v1 controllers plus a controller-less v2 mount at
// /sys/fs/cgroup/unified, which this package treats as v1). The file
// formats and safe file access come from github.com/opencontainers/cgroups
// (its fs and fs2 packages); this package decides where the cgroups live,
// creates and removes them, and enables v2 controllers itself.
//
// # Layout
//
// Sandbox cgroups nest under the cgroup mcpbox itself runs in, so limits the
// host puts on mcpbox (a systemd unit's MemoryMax=, a container's limits)
// bound its sandboxes too:
//
//	v1: <mount of C>/<own cgroup for C>/mcpbox/<id>   for C in memory, pids, cpu, cpuacct, freezer
//	v2: <own cgroup>/mcpbox/<id>
//
// With a workload pids limit (Limits.WorkloadPids) the sandbox's workload
// gets a cgroup of its own inside, so that its forks cannot take what the
// sandbox's limit leaves to the rest (Cgroup.Workload):
//
//	v1: <mount of pids>/<own cgroup for pids>/mcpbox/<id>/workload
//	v2: <own cgroup>/mcpbox/<id>/workload, and .../<id>/init for the rest
//
// Destroy removes <id>, nested cgroups first; the mcpbox directory stays,
// so concurrent Creates never race with its removal.
//
// # cgroup v2: delegation and the no-internal-processes rule
//
// A non-root v2 cgroup may hand controllers to its children only while it
// holds no processes itself. mcpbox's own cgroup O holds mcpbox, so before
// enabling memory, pids and cpu in O's cgroup.subtree_control, Create moves
// mcpbox into the leaf O/mcpbox-self - but only when mcpbox is the only
// process in O. If O holds other processes (a login session scope, say),
// Create fails with [ErrInternalProcesses] naming O; start mcpbox in a
// cgroup of its own instead, for example:
//
//	systemd-run --user --scope -p Delegate=yes mcpbox serve
//
// For an unprivileged user the same command is what makes cgroups work at
// all: systemd delegates the scope (ownership of its directory and
// cgroup.procs, cgroup.subtree_control) to the user, with the controllers its
// user manager delegates (memory and pids by default, cpu on newer systemd).
// Without delegation Create fails with a permission error and [Probe] says
// which file is not writable. Running under a unit without Delegate=yes
// works while mcpbox is alone in it, but systemd does not expect anyone to
// edit its cgroups and may undo the change on reload.
//
// # cgroup v1
//
// v1 has no internal-process rule and no delegation model worth the name:
// creating the directories needs write access to each hierarchy, in practice
// root. Killing uses the freezer when present so a fork bomb can't outrun
// the signal loop; v2 uses cgroup.kill (Linux 5.14+).
//
// A controller is required only when a limit needs it: Create fails with
// [ErrControllerMissing] for a memory limit without the memory controller,
// but a sandbox without limits works with whatever is there.
//
// A hybrid host whose controllers were moved to its v2 mount (a kernel
// booted with cgroup_no_v1=pids, say) is still used as v1: a sandbox is
// never split across the two, so a limit whose controller is on no v1
// hierarchy fails with [ErrControllerMissing] (mcpbox's default pids limit
// among them), and [Probe] reports that controller "not mounted as a v1
// hierarchy".
//
// On other systems every function returns [ErrUnsupported].
package cgroup
