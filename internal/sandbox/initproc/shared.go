package initproc

// InputDir is where the sandbox's input is mounted (sandbox.InputDir).
const InputDir = "/workspace/input"

// The workload's identity inside the sandbox's user namespace.
const (
	sandboxUID  = 1000
	sandboxUser = "mcpbox"
	sandboxHome = "/tmp/home"
)

// pathRule grants access beneath Path.
type pathRule struct {
	Path  string `json:"path"`
	Read  bool   `json:"read,omitempty"`
	Write bool   `json:"write,omitempty"`
	Exec  bool   `json:"exec,omitempty"`
	// Ioctl allows ioctls on devices opened beneath Path (terminals).
	Ioctl bool `json:"ioctl,omitempty"`
	// Optional rules are dropped when Path does not exist in the sandbox
	// (an exec.allow path for a tool the workload has not installed yet
	// grants nothing to take away).
	Optional bool `json:"optional,omitempty"`
}

// Inside the sandbox the only way out is the host's egress proxy, a unix
// socket bind-mounted at proxySocket, which the init serves on proxyAddr.
const (
	proxySocket = "/run/mcpbox/egress.sock"
	proxyAddr   = "127.0.0.1:3128"
)

// secretFile is one /run/secrets file as the init gets it.
type secretFile struct {
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

// secretsDir holds the workload's file secrets.
const secretsDir = "/run/secrets"

// maxFDs is how many idmapped mounts fit in one SCM_RIGHTS message.
const maxFDs = 253

// warmMsgMax bounds the claim (command, environment, directory and the
// lookup's candidate paths, laid out for the child: claimLayout): one
// SOCK_SEQPACKET datagram.
const warmMsgMax = 128 << 10

// Layer names one isolation layer. The names appear in errors, in doctor's
// output and in the config's sandbox.require list.
type Layer string

// The isolation layers a sandbox applies. Each one can be missing on a host;
// a missing layer stops the sandbox unless the Spec accepts its degradation.
const (
	LayerUserns   Layer = "userns"   // user namespaces (required: nothing works without)
	LayerSeccomp  Layer = "seccomp"  // the syscall filter
	LayerLandlock Layer = "landlock" // the second filesystem wall
	LayerCgroups  Layer = "cgroups"  // memory, pids and cpu limits
	LayerIdmap    Layer = "idmap"    // idmapped mounts (host root only)
)

// LayerOverlay names a failure to mount the input overlay
// (Spec.InputOverlay) in a StartError. It is not an isolation layer: it
// is not in AllLayers and can never be degraded, since falling back to a
// read-only or read-write bind would change what the workload may do.
const LayerOverlay Layer = "overlay"

// What the host side shares with the init on every platform.
type (
	// PathRule grants the workload access beneath a path (Landlock).
	PathRule = pathRule
	// SecretFile is one /run/secrets file.
	SecretFile = secretFile
)

// The workload's identity in the sandbox, the proxy's addresses, and the
// sizes both sides bound.
const (
	SandboxUID  = sandboxUID
	SandboxUser = sandboxUser
	SandboxHome = sandboxHome
	ProxySocket = proxySocket
	ProxyAddr   = proxyAddr
	MaxFDs      = maxFDs
	WarmMsgMax  = warmMsgMax
)
