package cgroup

import "errors"

var (
	// ErrUnsupported is returned on systems without cgroups, and by Freeze
	// and Thaw when the cgroup has no freezer.
	ErrUnsupported = errors.New("cgroups not supported")

	// ErrControllerMissing is returned by Create when a limit needs a
	// controller that this process can't use (not mounted on v1; not
	// enabled for or delegated to mcpbox's own cgroup on v2).
	ErrControllerMissing = errors.New("cgroup controller not available")

	// ErrInternalProcesses is returned by Create on cgroup v2 when mcpbox's
	// own cgroup holds other processes besides mcpbox, so controllers can't
	// be enabled for its children (the no-internal-processes rule).
	ErrInternalProcesses = errors.New("own cgroup holds other processes; run mcpbox in a cgroup of its own, e.g. systemd-run --scope -p Delegate=yes")

	// ErrExists is returned by Create when the sandbox's cgroup already
	// exists: a live sandbox with the same id, or a leftover CleanupStale
	// has not removed.
	ErrExists = errors.New("sandbox cgroup already exists")
)
