package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// reported are the controllers a Report covers, in order.
var reported = []string{"memory", "pids", "cpu", "freezer"}

// Probe tells which cgroup version is mounted and which controllers this
// process can use for sandboxes, without changing anything.
func Probe() Report {
	r := Report{Version: version()}
	switch r.Version {
	case "v2":
		r.Controllers = probeV2(v2Root)
	case "v1", "hybrid":
		r.Controllers = probeV1(r.Version)
	default:
		for _, name := range reported {
			r.Controllers = append(r.Controllers, ControllerReport{Name: name, Reason: "no cgroup file system mounted"})
		}
	}
	return r
}

func probeV1(version string) []ControllerReport {
	var out []ControllerReport
	for _, name := range reported {
		cr := ControllerReport{Name: name}
		parent, _, err := v1Parent(name)
		switch {
		case err != nil && version == "hybrid":
			cr.Reason = "not mounted as a v1 hierarchy (this hybrid host's v2 mount is not used)"
		case err != nil:
			cr.Reason = "not mounted as a v1 hierarchy"
		default:
			cr.Parent = parent
			cr.Usable, cr.Reason = canCreateIn(parent)
		}
		out = append(out, cr)
	}
	return out
}

func probeV2(root string) []ControllerReport {
	unusable := func(reason string) []ControllerReport {
		var out []ControllerReport
		for _, name := range reported {
			out = append(out, ControllerReport{Name: name, Reason: reason})
		}
		return out
	}
	base, err := v2Base(root)
	if err != nil {
		return unusable(err.Error())
	}
	avail, err := readList(base, "cgroup.controllers")
	if err != nil {
		return unusable(err.Error())
	}
	enabled, err := readList(base, "cgroup.subtree_control")
	if err != nil {
		return unusable(err.Error())
	}
	parent := filepath.Join(base, parentName)
	dirOK, dirReason := canCreateIn(parent)

	var out []ControllerReport
	for _, name := range reported[:3] {
		cr := ControllerReport{Name: name, Parent: parent}
		switch {
		case !slices.Contains(avail, name):
			cr.Reason = fmt.Sprintf("not in %s/cgroup.controllers: the parent cgroup does not enable or delegate it", base)
		case !dirOK:
			cr.Reason = dirReason
		case slices.Contains(enabled, name):
			cr.Usable = true
		default:
			cr.Usable, cr.Reason = canEnableIn(base)
		}
		out = append(out, cr)
	}
	fz := ControllerReport{Name: "freezer", Parent: parent, Usable: dirOK, Reason: dirReason}
	if dirOK && !v2Freezable(base) {
		fz.Usable, fz.Reason = false, "no cgroup.freeze (needs Linux 5.2+)"
	}
	return append(out, fz)
}

// canEnableIn tells whether Create could enable a controller in base's
// cgroup.subtree_control, mirroring enableControllers.
func canEnableIn(base string) (bool, string) {
	file := filepath.Join(base, "cgroup.subtree_control")
	if err := unix.Faccessat(unix.AT_FDCWD, file, unix.W_OK, unix.AT_EACCESS); err != nil {
		return false, fmt.Sprintf("can't enable it: %s: %v (cgroup not delegated to uid %d)", file, err, os.Geteuid())
	}
	if isRootCgroup(base) {
		return true, "" // exempt from the no-internal-processes rule
	}
	pids, err := cgroups.GetPids(base)
	if err != nil {
		return false, fmt.Sprintf("listing processes of %s: %v", base, err)
	}
	self := os.Getpid()
	others := slices.DeleteFunc(slices.Clone(pids), func(p int) bool { return p == self })
	if len(others) > 0 {
		return false, fmt.Sprintf("%s holds %d other processes, so cgroup v2 won't enable controllers for its children; "+
			"run mcpbox in a cgroup of its own (systemd-run --scope -p Delegate=yes)", base, len(others))
	}
	if len(pids) > 0 {
		return true, fmt.Sprintf("mcpbox will move itself into %s to enable it", filepath.Join(base, selfLeaf))
	}
	return true, ""
}

// v2Freezable reports whether cgroups under base will have cgroup.freeze,
// which the root cgroup itself lacks.
func v2Freezable(base string) bool {
	if cgroups.PathExists(filepath.Join(base, "cgroup.freeze")) {
		return true
	}
	return isRootCgroup(base) && kernelAtLeast(5, 2)
}

// isRootCgroup reports whether dir is the real v2 root, which alone lacks
// cgroup.type; the root of a cgroup namespace has it.
func isRootCgroup(dir string) bool {
	return !cgroups.PathExists(filepath.Join(dir, "cgroup.type"))
}

// canCreateIn tells whether this process may create cgroups in parent, or
// create parent itself.
func canCreateIn(parent string) (bool, string) {
	dir := parent
	if _, err := os.Stat(parent); err != nil {
		dir = filepath.Dir(parent)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK, unix.AT_EACCESS); err != nil {
		return false, fmt.Sprintf("can't create cgroups in %s: %v", dir, err)
	}
	return true, ""
}

func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var maj, min int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}
