package sandbox

import (
	"os"
	"syscall"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"mcpbox/internal/sandbox/initproc"
)

type (
	initConfig     = initproc.Config
	initReport     = initproc.Report
	workloadConfig = initproc.Workload
	workloadError  = initproc.WorkloadError
	bindSpec       = initproc.BindSpec
	overlaySpec    = initproc.OverlaySpec
	layerDir       = initproc.LayerDir
	forwardSpec    = initproc.ForwardSpec
)

const (
	initArg      = initproc.Arg
	exitSetup    = initproc.ExitSetup
	exitNoExec   = initproc.ExitNoExec
	exitNotFound = initproc.ExitNotFound
	stepLookup   = initproc.StepLookup
	stepNotFound = initproc.StepNotFound
	stageLower   = initproc.StageLower
	stageLayers  = initproc.StageLayers

	cgroupMoveThread = initproc.CgroupMoveThread
	cgroupClone      = initproc.CgroupClone
)

var (
	systemBinds   = initproc.SystemBinds()
	imageReserved = initproc.ImageReserved()
)

func imageDirs(root string) ([]string, error) { return initproc.ImageDirs(root) }

func claimLayout(base uintptr, dir string, args, env, cands []string, direct bool) ([]byte, error) {
	return initproc.ClaimLayout(base, dir, args, env, cands, direct)
}

func readForkReport(errR *os.File) (step uint32, errno syscall.Errno, err error) {
	return initproc.ReadForkReport(errR)
}

func forkFailure(c *workloadConfig, step uint32, errno unix.Errno) *workloadError {
	return initproc.ForkFailure(c, step, errno)
}

func lookCandidates(file, dir string, env []string) ([]string, bool) {
	return initproc.LookCandidates(file, dir, env)
}

func encodeConfig(c *initConfig) []byte          { return initproc.EncodeConfig(c) }
func decodeReport(b []byte) (*initReport, error) { return initproc.DecodeReport(b) }

func notInPath(file string) error             { return initproc.NotInPath(file) }
func commandError(err error) *workloadError   { return initproc.CommandError(err) }
func regularNoSymlinks(path string) error     { return initproc.RegularNoSymlinks(path) }
func openNoSymlinks(path string) (int, error) { return initproc.OpenNoSymlinks(path) }

func packFilter(prog []bpf.RawInstruction) []byte { return initproc.PackFilter(prog) }

// fakeNet holds the addresses the init's DNS gives names; no forward may
// listen there.
var fakeNet = initproc.FakeNet
