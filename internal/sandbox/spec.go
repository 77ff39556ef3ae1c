package sandbox

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox/initproc"
)

// AllLayers lists every layer, in the order doctor reports them.
var AllLayers = []Layer{LayerUserns, LayerSeccomp, LayerLandlock, LayerCgroups, LayerIdmap}

// ParseLayer returns the Layer named s.
func ParseLayer(s string) (Layer, error) {
	for _, l := range AllLayers {
		if string(l) == s {
			return l, nil
		}
	}
	return "", fmt.Errorf("unknown isolation layer %q (known: %s)", s, layerList())
}

func layerList() string {
	names := make([]string, len(AllLayers))
	for i, l := range AllLayers {
		names[i] = string(l)
	}
	return strings.Join(names, ", ")
}

// Layer names one isolation layer. The names appear in errors, in doctor's
// output and in the config's sandbox.require list.
type Layer = initproc.Layer

// The isolation layers a sandbox applies. Each one can be missing on a host;
// a missing layer stops the sandbox unless the Spec accepts its degradation.
const (
	LayerUserns   = initproc.LayerUserns   // user namespaces (required: nothing works without)
	LayerSeccomp  = initproc.LayerSeccomp  // the syscall filter
	LayerLandlock = initproc.LayerLandlock // the second filesystem wall
	LayerCgroups  = initproc.LayerCgroups  // memory, pids and cpu limits
	LayerIdmap    = initproc.LayerIdmap    // idmapped mounts (host root only)
)

// LayerOverlay names a failure to mount the input overlay
// (Spec.InputOverlay) in a StartError. It is not an isolation layer: it
// is not in AllLayers and can never be degraded, since falling back to a
// read-only or read-write bind would change what the workload may do.
const LayerOverlay = initproc.LayerOverlay

// Secret is one resolved secret of the workload.
type Secret struct {
	Name   string // environment variable or /run/secrets file name
	Value  []byte
	AsFile bool
}

// Mount is one host directory or file bound into the sandbox.
type Mount struct {
	// Source is an absolute host path with symlinks already resolved by
	// the caller: Start refuses a path that still contains one. Below
	// Landlock ABI 9 it also refuses a source that is, or holds in its top
	// two levels, a unix socket ([ErrMountSocket]): nothing else would
	// stop the workload from connecting to it.
	Source   string
	Target   string // absolute path inside the sandbox
	Writable bool
	// Exec allows executing files from this mount. Read-only mounts are
	// executable by default; writable ones only when the Spec sets ExecWritable.
	Exec bool
	// Internal marks a mount of mcpbox's own (a package server's installed
	// tree, mcpbox's binary) rather than one the user asked for. The
	// sandbox mounts it like any other; the gateway leaves it out of the
	// server's roots, which name the user's files.
	Internal bool
	// KeepGit leaves a writable mount's repositories' .git writable.
	// Otherwise what git reads of the repositories at, directly in and
	// above the mount's root (.git, hooks, included config, submodules)
	// is read-only in the sandbox where it lies in a writable mount: git
	// runs what a .git says (hooks, commands in its config) at the
	// user's next git command on the host (planGit).
	KeepGit bool
}

// Overlay names the writable layers of an overlay mount: two host
// directories, absolute, without symlinks, on the same mount, neither
// inside the other nor overlapping the lower layer, created by the caller
// and writable by it (mode 0700 is enough: the sandbox reaches them as the
// caller's uid, see overlay_linux.go); Upper's own mode and owner become
// /workspace/input's. Work may be reused across runs; the kernel leaves
// an empty Work/work of mode 0 there, which a caller that is not root must
// chmod before removing it. One mounted sandbox at a time per Upper: the
// kernel does not stop two overlays from sharing one, but their views
// would not agree.
//
// Upper receives the workload's changes in overlayfs's format, owned by
// the caller: new files and directories; lower files copied up whole when
// written, but also on a mere chmod, touch or hard link, so a file in
// Upper may equal its lower original; a deleted name as a whiteout, a
// character device 0/0; a directory deleted and recreated, or one that
// replaced a file, as an opaque directory, marked with the xattr
// user.overlay.opaque = "y" (mounts in a user namespace use "userxattr",
// hence user. rather than trusted.). Other user.overlay.* xattrs
// (origin, impure) are bookkeeping a diff can ignore; a user.overlay.*
// xattr the workload sets itself lands escaped, as user.overlay.overlay.*,
// so only the exact name user.overlay.opaque marks an opaque dir.
// Renaming a directory that exists in the lower layer fails with EXDEV
// (no redirect_dir in a user namespace); mv falls back to copy and
// delete, so no redirect xattrs appear either. Upper may hold any
// symlink the workload made: readers must not follow them.
type Overlay struct {
	Upper, Work string
}

// Limits bounds the sandbox's resources. A zero field means no limit.
type Limits struct {
	Memory  int64         // bytes, memory+swap
	Pids    int64         // the workload's processes and threads (the init's are extra)
	CPU     float64       // cores
	TmpSize int64         // bytes of /tmp (tmpfs); zero means DefaultTmpSize
	Timeout time.Duration // wall clock from start to kill
	// OutputSize bounds the bytes (allocated blocks) the host's output dir
	// (Spec.Output) may hold, InputSize those of the input overlay's upper
	// dir (Spec.InputOverlay); zero means no limit. No single file may
	// grow past the larger of the two (RLIMIT_FSIZE), and the sandbox is
	// killed once a measurement finds a dir over its limit: see
	// disksize_linux.go for the slack between two measurements.
	OutputSize int64
	InputSize  int64
}

// DefaultTmpSize is the size of /tmp when Limits.TmpSize is zero.
const DefaultTmpSize = 256 << 20

// Network describes egress. Without rules and forwards the sandbox has
// loopback only; with them, its only way out is mcpbox's egress proxy
// (package egress), reached through 127.0.0.1:3128 inside the sandbox.
type Network struct {
	Rules    []egress.Rule
	Forwards []egress.Forward
	Limits   egress.Limits   // zero fields: egress's defaults
	Resolver egress.Resolver // nil: the host's resolver
	// Log receives one event per connection the proxy handled; nil drops
	// them.
	Log func(egress.Event)
	// Opened receives each connection's event once its target is decided
	// (egress.Options.Opened); nil drops them.
	Opened func(egress.Event)
	// Injector, if non-nil, makes the proxy terminate TLS for the
	// Injector's hosts with CA, which is then required
	// (egress.Options.Injector). TrustBundle, the PEM certificates the
	// sandbox trusts then (the host's and CA's), is put at
	// TrustBundlePath and over the system bundle: the host's, or with an
	// image Root the files the image's usual bundle paths lead to (links
	// followed inside the image), or the common path when it has none;
	// CA's certificate alone at TrustCAPath (trust_linux.go).
	Injector    egress.Injector
	CA          *egress.CA
	TrustBundle []byte
}

// Enabled reports whether the sandbox gets the egress proxy.
func (n Network) Enabled() bool { return len(n.Rules) > 0 || len(n.Forwards) > 0 }

// TransparentPorts are the ports on which a program that ignores the
// proxy variables still reaches allowed hosts by name, through the
// sandbox's own DNS and the proxy (initproc's transparent_linux.go): the
// ports the rules name (443 and 80 for a rule without ports) below 1024,
// which the workload cannot bind itself, except 53 and a port a forward
// listens on. Sorted; none without rules.
func (n Network) TransparentPorts() []int {
	var ports []int
	for _, r := range n.Rules {
		for _, p := range r.AllowedPorts() {
			if p > 0 && p < 1024 && p != 53 && !slices.Contains(ports, p) && !n.forwardListensOn(p) {
				ports = append(ports, p)
			}
		}
	}
	slices.Sort(ports)
	return ports
}

// bindsLowPorts reports whether the init listens on a port below 1024
// (the DNS and the transparent ports, or a forward's), which needs
// CAP_NET_BIND_SERVICE in the sandbox's user namespace.
func (n Network) bindsLowPorts() bool {
	if len(n.TransparentPorts()) > 0 {
		return true
	}
	for _, f := range n.Forwards {
		if ap, err := netip.ParseAddrPort(f.Listen); err == nil && ap.Port() < 1024 {
			return true
		}
	}
	return false
}

// forwardListensOn reports whether a forward listens on port.
func (n Network) forwardListensOn(port int) bool {
	for _, f := range n.Forwards {
		if ap, err := netip.ParseAddrPort(f.Listen); err == nil && int(ap.Port()) == port {
			return true
		}
	}
	return false
}

// Spec describes one sandbox. It is plain data: the CLI and the gateway
// build it from flags and config; Run enforces it.
type Spec struct {
	// Args is the command and its arguments. Args[0] is looked up in the
	// sandbox's PATH when it has no slash.
	Args []string
	// Env is set in the sandbox on top of the basics (PATH, HOME, LANG,
	// TERM, TMPDIR, USER). Nothing of the host environment passes otherwise.
	Env []string
	// Dir is the working directory inside the sandbox. Empty means
	// /workspace/output when there is an output mount, else /workspace.
	Dir string

	// Input is bound read-only at /workspace/input, Output read-write at
	// /workspace/output; either may be empty. Mounts are extra binds.
	// Where Output or a writable Mount lies inside Input (the default's
	// ./mcpbox-out in the project), the input view shows an empty
	// read-only directory instead ([Spec.InputMasks]): the workload sees
	// what it writes once, and cannot write it through the input.
	Input, Output string
	Mounts        []Mount
	// InputOverlay, if non-nil, makes /workspace/input a writable overlay
	// with Input as its read-only lower layer: the workload's changes land
	// in InputOverlay.Upper and Input stays untouched. Input must be set.
	// The overlay is not executable unless ExecWritable (or ExecAllow)
	// says so, like any writable mount. Nil means a read-only bind.
	InputOverlay *Overlay

	// Root, if set, is a root file system tree on the host (an unpacked
	// OCI image, see package image) that replaces the host's system view:
	// its top-level directories (/usr, /bin, /lib, /opt, /app, ...) are
	// bound read-only, nosuid and nodev, executable; its top-level
	// symlinks are recreated; its /etc entries are bound read-only beside
	// the synthesized passwd, group, hosts, hostname, resolv.conf and
	// nsswitch.conf. The image's /dev, /proc, /sys, /tmp, /run and
	// /workspace are never used: the sandbox provides its own. Nothing of
	// the host's /usr, /lib or /etc is visible. Root must be absolute,
	// clean and free of symlinks, like a mount source; everything beneath
	// it is opened without following symlinks, so a tree holding hostile
	// links cannot reach outside it. Files owned by the invoking user
	// appear owned by the sandbox user. Empty means the host's system view.
	Root string

	// ExecWritable allows executing files from /tmp, /workspace/output and
	// writable mounts. ExecAllow adds single paths (files or directories)
	// that may be executed even when they lie on a writable mount.
	ExecWritable bool
	ExecAllow    []string

	Limits Limits

	// Network is the sandbox's way out; the zero value is none at all.
	Network Network

	// Secrets reach the workload only: as environment variables, or as
	// read-only files in /run/secrets (a tmpfs, mode 0400, owned by the
	// sandbox user). Their values travel to the init through a pipe; they
	// are never written to a host file or put on a command line.
	Secrets []Secret

	// AllowDegraded names layers the caller accepts to lose when the host
	// cannot provide them. AllowAllDegraded accepts any.
	AllowDegraded    []Layer
	AllowAllDegraded bool

	// ID names the sandbox (its cgroup), [a-z0-9_] only. Empty means a
	// fresh random "sbx_" id.
	ID string

	// hold: the init waits for its workload (Prepare).
	hold bool
}

func (s *Spec) degradable(l Layer) bool {
	if l == LayerUserns || l == LayerOverlay {
		return false
	}
	if s.AllowAllDegraded {
		return true
	}
	for _, d := range s.AllowDegraded {
		if d == l {
			return true
		}
	}
	return false
}

// Stdio is the workload's standard streams. *os.File values are handed to
// the sandbox as they are (no copying); other readers and writers are
// pumped through pipes by os/exec.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Result is how a sandbox ended.
type Result struct {
	// ExitCode is the workload's exit code, 128+signal when it was killed,
	// or 125/126/127 when the sandbox or the command could not start.
	ExitCode int
	TimedOut bool
	// OOMKilled and PidsExhausted say whether a cgroup limit was hit.
	OOMKilled     bool
	PidsExhausted bool
	MemoryPeak    int64
	Duration      time.Duration
	// SizeExceeded, if not nil, is the workspace dir that outgrew its
	// size limit (Limits.OutputSize or InputSize), or could not be
	// measured; the sandbox was killed for it, unless it had already
	// exited when the final measurement found it.
	SizeExceeded *SizeError
}

// SizeError is a workspace dir over its size limit, or one that could not
// be measured (Err), which counts as over: the limit is not enforced
// otherwise.
type SizeError struct {
	Dir   string // where the sandbox sees it: /workspace/output or /workspace/input
	Host  string // where the host has it (for the operator's log; not for clients)
	Limit int64  // bytes
	Used  int64  // bytes measured on the host; zero when Err is set
	Err   error
	// Stopped says the sandbox was killed for it; false when the final
	// measurement found it after the workload had exited on its own.
	Stopped bool
	// AtStart: the first measurement, right after the start, found the
	// dir over its limit: it was full before this sandbox (a workspace an
	// earlier one filled), and every new one on it would be stopped too.
	AtStart bool
}

func (e *SizeError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("measuring %s against its size limit of %d bytes: %v", e.Dir, e.Limit, e.Err)
	}
	return fmt.Sprintf("%s holds %d bytes, over its size limit of %d bytes", e.Dir, e.Used, e.Limit)
}

func (e *SizeError) Unwrap() error { return e.Err }

// StartError is a sandbox that could not start. Layer names the isolation
// layer at fault, if one is.
type StartError struct {
	Layer Layer
	Code  int // exit code to report: 125, 126 or 127
	Err   error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Check is one line of mcpbox doctor: a feature, whether this host and
// process have it, and what its absence costs.
type Check struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail"`
	Degrades string `json:"degrades,omitempty"` // what is lost without it
	// Required checks fail the default policy; the others only weaken it.
	Required bool  `json:"required"`
	Layer    Layer `json:"layer,omitempty"`
}
