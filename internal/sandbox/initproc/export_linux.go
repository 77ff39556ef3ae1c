package initproc

import (
	"golang.org/x/net/bpf"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// What the host side (package sandbox) shares with the init: the config
// it sends and the report it reads, and the few checks and layouts both
// sides make. Inside this package the init's own names are used.

// Arg is the hidden first argument that makes a binary the sandbox init
// (see Main).
const Arg = "__mcpbox_init__"

// The sandbox's own exit codes, chosen like docker's and env(1)'s.
const (
	ExitSetup    = exitSetup    // the sandbox could not be set up
	ExitNoExec   = exitNoExec   // the command was found but could not run
	ExitNotFound = exitNotFound // the command was not found
)

// Where the init stages the input overlay's layers.
const (
	StageLower  = stageLower
	StageLayers = stageLayers
)

// FakeNet holds the addresses the init's DNS gives names
// (transparent_linux.go); nothing else in the sandbox may listen there.
var FakeNet = fakeNet

// Main runs the sandbox init when the process was started as one (os.Args[1]
// is Arg), and returns otherwise; the lean init's main calls it first.
func Main() {
	if len(os.Args) >= 2 && os.Args[1] == Arg {
		os.Exit(runInit())
	}
}

// Run runs the sandbox init and returns its exit status (sandbox.Main).
func Run() int { return runInit() }

// The child's steps a host reads from an ahead-forked workload's report.
const (
	StepLookup   = stepLookup
	StepNotFound = stepNotFound
)

// The ops of a git plan (BindSpec.GitOps).
const (
	GitMountPoint = gitMountPoint
	GitHold       = gitHold
	GitCover      = gitCover
)

// How the init starts the workload in its nested cgroup (Workload.Cgroup).
const (
	CgroupMoveThread = cgroupMoveThread
	CgroupClone      = cgroupClone
)

type (
	// Config is what the host sends the init.
	Config = initConfig
	// Report is what the init sends back.
	Report = initReport
	// Workload is the command and the walls to put up around it.
	Workload = workloadConfig
	// WorkloadError says why the workload did not start.
	WorkloadError = workloadError
	// BindSpec is one bind mount inside the sandbox.
	BindSpec = bindSpec
	// GitOp is one mount of a writable bind's git plan.
	GitOp = gitOp
	// OverlaySpec is the input overlay as the init mounts it.
	OverlaySpec = overlaySpec
	// LayerDir is the overlay's upper or work dir.
	LayerDir = layerDir
	// ForwardSpec is one network.forward rule.
	ForwardSpec = forwardSpec
)

// SystemBinds are the read-only, executable host paths every sandbox sees.
func SystemBinds() []string { return systemBinds }

// ImageReserved are the top-level names of an image root the sandbox
// makes itself.
func ImageReserved() []string { return imageReserved }

// ImageDirs lists the top-level directories of an image root the
// sandbox binds.
func ImageDirs(root string) ([]string, error) { return imageDirs(root) }

// ClaimLayout lays out the claim of an ahead-forked workload (see
// claimLayout).
func ClaimLayout(base uintptr, dir string, args, env, cands []string, direct bool) ([]byte, error) {
	return claimLayout(base, dir, args, env, cands, direct)
}

// ReadForkReport reads a forked workload's report (see readForkReport).
func ReadForkReport(errR *os.File) (step uint32, errno syscall.Errno, err error) {
	return readForkReport(errR)
}

// ForkFailure turns a forked child's report into the workload's error.
func ForkFailure(c *Workload, step uint32, errno unix.Errno) *WorkloadError {
	return forkFailure(c, step, errno)
}

// LookCandidates returns the paths a lookup of file tries, in order, and
// whether file names its one path itself.
func LookCandidates(file, dir string, env []string) (cands []string, direct bool) {
	return lookCandidates(file, dir, env)
}

// NotInPath is the error of a command found nowhere in PATH.
func NotInPath(file string) error { return notInPath(file) }

// CommandError is the workload's error for a failed lookup.
func CommandError(err error) *WorkloadError { return commandError(err) }

// RegularNoSymlinks fails unless path is a regular file reached through
// no symlink.
func RegularNoSymlinks(path string) error { return regularNoSymlinks(path) }

// OpenNoSymlinks opens path (O_PATH) through no symlink.
func OpenNoSymlinks(path string) (int, error) { return openNoSymlinks(path) }

// OverlayError wraps err as a failure to set up the input overlay, as the
// init reports one.
func OverlayError(err error) error { return &overlayError{err} }

// PackFilter packs a seccomp filter as the init takes it
// (Workload.Seccomp).
func PackFilter(prog []bpf.RawInstruction) []byte { return packFilter(prog) }

// ProcMasked and ProcReadOnly are the /proc paths the init hides and
// makes read-only, for the tests that attack them.
func ProcMasked() []string   { return procMasked }
func ProcReadOnly() []string { return procReadOnly }

// EncodeConfig is c as the init reads it (codec_linux.go).
func EncodeConfig(c *Config) []byte { return encodeConfig(c) }

// DecodeReport reads a report as the init sends it (codec_linux.go).
func DecodeReport(b []byte) (*Report, error) { return decodeReport(b) }
