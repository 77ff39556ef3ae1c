package sandbox

import (
	"fmt"
	"mcpbox/internal/cgroup"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Doctor probes the host. Run with live is true, it also starts a real
// sandbox with /bin/true, the only proof that every layer applies.
func Doctor() []Check {
	h := probeHost()
	var cs []Check
	mode := "unprivileged user"
	if h.root {
		mode = "root (sandbox uids map to an unprivileged host range)"
	}
	cs = append(cs, Check{Name: "user namespaces", OK: h.usernsErr == nil, Required: true, Layer: LayerUserns,
		Detail:   errOr(h.usernsErr, "available as "+mode),
		Degrades: "no sandbox at all: mcpbox cannot run"})
	cs = append(cs, Check{Name: "mount setattr / new mount API", OK: kernelAtLeast(5, 12), Required: true,
		Detail:   "kernel " + kernelRelease() + " (5.12 or later needed)",
		Degrades: "read-only binds cannot be applied recursively: mcpbox cannot run"})
	ll := fmt.Sprintf("ABI %d", h.landlockABI)
	if h.landlockABI >= 6 {
		ll += " (filesystem, TCP, signal and abstract-socket scoping)"
	}
	cs = append(cs, Check{Name: "landlock", OK: h.landlockABI > 0, Required: true, Layer: LayerLandlock,
		Detail:   map[bool]string{true: ll, false: "unavailable (kernel without CONFIG_SECURITY_LANDLOCK or not in lsm=)"}[h.landlockABI > 0],
		Degrades: "no second filesystem wall: write and exec limits rest on mount flags alone"})
	if h.landlockABI > 0 && h.landlockABI < 6 {
		cs = append(cs, Check{Name: "landlock scoping", OK: false,
			Detail:   fmt.Sprintf("ABI %d < 6", h.landlockABI),
			Degrades: "signals and abstract unix sockets are not scoped to the sandbox (namespaces still separate them)"})
	}
	if h.landlockABI > 0 {
		cs = append(cs, socketCheck(h.landlockABI))
	}
	cs = append(cs, Check{Name: "seccomp", OK: h.seccompErr == nil, Required: true, Layer: LayerSeccomp,
		Detail:   errOr(h.seccompErr, "filter mode available"),
		Degrades: "dangerous syscalls (mount, ptrace, bpf, io_uring, ...) are not filtered"})
	cg := cgroup.Probe()
	cgOK, _ := cgroupsUsable(cg)
	cs = append(cs, Check{Name: "cgroups", OK: cgOK, Required: true, Layer: LayerCgroups,
		Detail: cgroupSummary(cg),
		Degrades: "no memory or cpu limits: a memory hog can hurt the host; without cgroups the pids limit still holds " +
			"(RLIMIT_NPROC, counted in the workload's own user namespace), as do the timeout and the tmpfs sizes"})
	if h.root {
		cs = append(cs, Check{Name: "idmapped mounts", OK: kernelAtLeast(5, 12), Layer: LayerIdmap,
			Detail:   "used as root so files written to --output belong to the invoking user",
			Degrades: "files written by the sandbox land owned by its unprivileged host uid"})
	}
	cs = append(cs, initCheck())
	cs = append(cs, Check{Name: "overlayfs", OK: hasFilesystem("overlay"),
		Detail:   map[bool]string{true: "available", false: "not in /proc/filesystems"}[hasFilesystem("overlay")],
		Degrades: "filesystem.input.mode: overlay is unavailable"})
	return cs
}

// socketCheck says whether Landlock restricts connects to pathname unix
// sockets. Without it mcpbox refuses mounts with a socket in their top two
// levels, but one deeper down, or created after the start, stays reachable.
func socketCheck(abi int) Check {
	c := Check{Name: "landlock unix socket connect", OK: abi >= resolveUnixABI,
		Degrades: "the sandbox can connect to a listening unix socket inside a mounted directory " +
			"(an ssh or gpg agent, a docker socket): mcpbox refuses to mount a directory with one in its top two levels, " +
			"but not one deeper down or created after the start"}
	c.Detail = fmt.Sprintf("ABI %d restricts connects to pathname unix sockets", abi)
	if !c.OK {
		c.Detail = fmt.Sprintf("ABI %d < %d: connects to pathname unix sockets are not restricted", abi, resolveUnixABI)
	}
	return c
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

func kernelAtLeast(major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(kernelRelease(), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func hasFilesystem(name string) bool {
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(strings.TrimPrefix(line, "nodev")) == name {
			return true
		}
	}
	return false
}
