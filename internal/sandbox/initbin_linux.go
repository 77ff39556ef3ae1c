package sandbox

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// The sandbox init is this binary re-executed. mcpbox links in everything
// the gateway needs (protobuf, gRPC, OpenTelemetry, CEL, SQLite, ...), and
// Go runs every package's init before main: the re-executed init spends
// ~9 ms of CPU on a 2-core host before it does anything, where a binary
// of the init's own package (internal/sandbox/initproc, statically linked)
// takes ~1 ms, about what an empty Go program does. So when a lean init
// binary, InitName (cmd/mcpbox-init), sits next to the mcpbox executable
// and comes from the very same build, the sandbox starts it instead.
//
// "The same build" is checked, not assumed: an init from another version
// could lack a wall this one puts up. Both binaries must carry the same
// module version or VCS revision (neither built from a modified tree),
// Go version and build settings; anything less, a development build
// included, falls back to re-executing mcpbox. The file must be a regular
// file of root or of the owner of the mcpbox executable, writable by no
// one else. It is opened once and executed through that descriptor, so a
// file swapped in later is never run.

// InitName is the file name of the lean sandbox init looked for next to
// the executable.
const InitName = "mcpbox-init"

// leanInitFD is where the lean init's descriptor is kept: far above the
// descriptors os/exec arranges in the child (stdio and ExtraFiles), which
// it may dup over lower numbers before execve.
const leanInitFD = 200

// leanInit returns the lean init's /proc/self/fd path, or why there is
// none; looked for once per process.
var leanInit = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	self, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("this binary has no build info")
	}
	if err := identified(self); err != nil {
		return "", err // no init can be shown to be of the same build
	}
	return openLeanInit(filepath.Join(filepath.Dir(exe), InitName), exe, func(b *debug.BuildInfo) bool { return sameBuild(self, b) })
})

// initPath is what the sandbox init is executed from: the lean init if
// there is a trusted one, else this binary. A variable for tests.
var initPath = func() string {
	if p, err := leanInit(); err == nil {
		return p
	}
	return "/proc/self/exe"
}

// initCheck is doctor's line on which init sandboxes start with.
func initCheck() Check {
	c := Check{Name: "sandbox init", OK: true, Detail: InitName + " of the same build, next to mcpbox"}
	_, err := leanInit()
	var unid *unidentifiedError
	switch {
	case errors.As(err, &unid):
		c.Detail = "mcpbox re-executed (" + err.Error() + ")"
	case err != nil:
		c.Detail = "mcpbox re-executed (" + err.Error() + "); install " + InitName +
			" built from the same clean checkout next to mcpbox for starts ~6 ms of CPU cheaper"
	}
	return c
}

// unidentifiedError: the running mcpbox carries nothing that identifies
// its build, so no init can be shown to come from the same one; the
// cause is mcpbox's build, not the init next to it.
type unidentifiedError struct{ why string }

func (e *unidentifiedError) Error() string {
	return "mcpbox itself " + e.why + ", so no " + InitName + " can be shown to be of its build; for starts ~6 ms of CPU cheaper, build both in a git clone (not a git worktree) of an unmodified revision: go build ./cmd/mcpbox ./cmd/mcpbox-init"
}

// identified returns an *unidentifiedError unless bi names one build: a
// released module version, or a clean VCS revision.
func identified(bi *debug.BuildInfo) error {
	s := settings(bi)
	switch {
	case s["vcs.modified"] == "true":
		return &unidentifiedError{"was built from a modified tree (vcs.modified)"}
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		return nil
	case s["vcs.revision"] == "":
		return &unidentifiedError{"carries no version-control stamp (built with -buildvcs=false, outside a repository, or in a git worktree, which go does not stamp)"}
	}
	return nil
}

// openLeanInit opens path, checks that it may serve as the init of
// binary exe and that its build info passes same, and returns a
// /proc/self/fd path to it; the descriptor stays open for the life of the
// process.
func openLeanInit(path, exe string, same func(*debug.BuildInfo) bool) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // the duplicate below is the one kept
	var st, exeSt unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	if err := unix.Stat(exe, &exeSt); err != nil {
		return "", err
	}
	if err := checkInitFile(&st, exeSt.Uid); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	info, err := buildinfo.Read(f)
	if err != nil {
		return "", fmt.Errorf("%s: reading build info: %w", path, err)
	}
	if !same(info) {
		return "", fmt.Errorf("%s: not from the same clean build as %s (both need one VCS revision or release, unmodified)", path, exe)
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, leanInitFD)
	if err != nil {
		return "", err
	}
	return "/proc/self/fd/" + strconv.Itoa(high), nil
}

// checkInitFile accepts a regular, executable file owned by root or by
// owner, the owner of the mcpbox executable, and writable by its owner
// only.
func checkInitFile(st *unix.Stat_t, owner uint32) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("not a regular file")
	case st.Mode&0o111 == 0:
		return fmt.Errorf("not executable")
	case st.Mode&0o022 != 0:
		return fmt.Errorf("writable by group or others (mode %o)", st.Mode&0o7777)
	case st.Uid != 0 && st.Uid != owner:
		return fmt.Errorf("owned by uid %d, neither root nor the owner of mcpbox (%d)", st.Uid, owner)
	}
	return nil
}

// sameBuild reports whether a and b come from one identified build: the
// same main module at the same released version or clean VCS revision,
// the same Go, and the same build settings apart from the VCS time.
func sameBuild(a, b *debug.BuildInfo) bool {
	if a.GoVersion != b.GoVersion || a.Main.Path != b.Main.Path || a.Main.Version != b.Main.Version || a.Main.Sum != b.Main.Sum {
		return false
	}
	sa, sb := settings(a), settings(b)
	if sa["vcs.modified"] == "true" || sb["vcs.modified"] == "true" {
		return false
	}
	released := a.Main.Version != "" && a.Main.Version != "(devel)"
	if !released && sa["vcs.revision"] == "" {
		return false // nothing identifies the build
	}
	for _, k := range []string{"vcs.revision", "vcs.modified", "-tags", "-ldflags", "-gcflags", "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOEXPERIMENT"} {
		if sa[k] != sb[k] {
			return false
		}
	}
	return true
}

func settings(bi *debug.BuildInfo) map[string]string {
	m := make(map[string]string, len(bi.Settings))
	for _, s := range bi.Settings {
		m[s.Key] = s.Value
	}
	return m
}
