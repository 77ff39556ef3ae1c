package config

import (
	"fmt"
	"slices"
	"time"
)

// Meta records where a mapping sits in the file and where each of its values
// starts, so that Validate can point at the offending value. It is
// bookkeeping, not policy: compare configs with Meta (and Pos) ignored.
// The zero Meta (a config built in code) makes every position unknown.
type Meta struct {
	// Pos is where the key that introduces the mapping is (for entries of
	// a named mapping such as servers and secrets, where the name is); for
	// a list element or the top level, where the mapping starts.
	Pos  Pos
	keys map[string]Pos
}

// At returns where the value of key starts (a scalar), or where key is (a
// mapping or list: the line that names the block), or m.Pos if key is
// absent.
func (m Meta) At(key string) Pos {
	if p, ok := m.keys[key]; ok {
		return p
	}
	return m.Pos
}

// Elem returns where element i of the list under key starts, or At(key).
func (m Meta) Elem(key string, i int) Pos {
	if p, ok := m.keys[elemKey(key, i)]; ok {
		return p
	}
	return m.At(key)
}

// Has reports whether key was written in the file, even with a zero value.
func (m Meta) Has(key string) bool {
	_, ok := m.keys[key]
	return ok
}

func (m *Meta) set(key string, p Pos) {
	if m.keys == nil {
		m.keys = make(map[string]Pos)
	}
	m.keys[key] = p
}

func elemKey(key string, i int) string { return fmt.Sprintf("%s[%d]", key, i) }

// Config is a parsed mcpbox.yaml. Paths are kept as written: relative ones
// are resolved against the config file's directory, and a leading "~" is
// expanded, by the caller (the CLI), not here.
//
// Lists and named mappings are nil when their key is absent and non-nil
// (possibly empty) when it is present; Marshal keeps that difference.
type Config struct {
	File      string // the name given to Parse, used in error messages
	Version   int    // must be 1
	StateDir  string // empty: the project's own, under $XDG_STATE_HOME/mcpbox/projects
	Listen    Listen
	Clients   []Client
	Servers   []*Server // in file order; the first one is the --policy server
	Sandbox   Sandbox   // defaults for every server
	Approvals Approvals
	Audit     Audit
	OAuth     OAuth   // where the key of the stored OAuth tokens comes from
	Backend   Backend // where servers run (backend.go); zero: here
	Meta      Meta
}

// Server returns the server called name, or nil.
func (c *Config) Server(name string) *Server {
	for _, s := range c.Servers {
		if s != nil && s.Name == name {
			return s
		}
	}
	return nil
}

// RequiredLayers returns the isolation layers that must be in place for s
// (nil s: for the config's default): s.Sandbox.Require if set, else the
// top-level sandbox.require if set, else every layer.
func (c *Config) RequiredLayers(s *Server) []string {
	switch {
	case s != nil && s.Sandbox.Require != nil:
		return slices.Clone(s.Sandbox.Require)
	case c.Sandbox.Require != nil:
		return slices.Clone(c.Sandbox.Require)
	}
	return AllLayers()
}

// Listen is where the gateway accepts MCP clients besides stdio.
type Listen struct {
	HTTP HTTP
	Meta Meta
}

// HTTP configures the Streamable HTTP endpoint.
type HTTP struct {
	// Addr is HOST:PORT; empty: no HTTP unless `serve --http` gives one.
	// A non-loopback host is only valid when clients (tokens) are configured.
	Addr string
	// AllowedOrigins are Origin header patterns "scheme://host[:port]";
	// the port may be "*". Empty: only requests without an Origin header.
	AllowedOrigins []string
	TLS            TLS
	// OAuth, if set, also admits JWT access tokens of an issuer.
	OAuth *HTTPOAuth
	Meta  Meta
}

// TLS names a certificate and key file; both or neither must be set.
type TLS struct {
	Cert, Key string
	Meta      Meta
}

// Client is an HTTP client identity; each gets its own sandboxes and workspace.
type Client struct {
	Name  string // same syntax as server names
	Token Token
	// Tools narrows what this client may call, on top of each server's
	// tools policy; globs over "SERVER/TOOL". The zero value (no tools
	// key) adds no restriction.
	Tools ClientTools
	// Role is what the client's token may do in the dashboard (/ui/):
	// RoleAdmin or RoleViewer; "": it cannot log in there.
	Role string
	Meta Meta
}

// Dashboard roles of a client (clients[].role).
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// ClientTools is a client's own tool policy: globs (path.Match) over
// "SERVER/TOOL". When the key is present, a call must match Allow or
// Approve and not Deny; Approve adds human review.
type ClientTools struct {
	Allow, Deny, Approve []string
	Meta                 Meta
}

// Token says where a client's bearer token comes from.
type Token struct {
	From string // a secret reference: env:VAR, file:PATH or cmd:COMMAND
	Meta Meta
}

// Approvals configures human review.
type Approvals struct {
	Timeout  Duration // zero: DefaultApprovalTimeout
	Channels []string // elicitation, cli, web
	Meta     Meta
}

// DefaultApprovalTimeout is approvals.timeout when it is absent. It stays
// below the 60 s after which common MCP clients give up on a request, so
// that the client reads the gateway's denial, not its own timeout.
const DefaultApprovalTimeout = Duration(50 * time.Second)

// EffectiveTimeout is how long a call waits for approval.
func (a Approvals) EffectiveTimeout() time.Duration {
	if a.Timeout == 0 {
		return time.Duration(DefaultApprovalTimeout)
	}
	return time.Duration(a.Timeout)
}

// Audit configures the audit log.
type Audit struct {
	Store           string // "sqlite" (also the meaning of empty)
	JSONL           string // path of an additional JSON-lines copy; empty: none
	IncludePayloads bool   // record call arguments and results (redacted)
	// OnFailure is what happens to a call whose audit record cannot be
	// committed: AuditRefuse (also the meaning of empty) or AuditAllow.
	OnFailure string
	Retention Retention
	Meta      Meta
}

// Retention bounds the audit store; zero fields keep records forever.
type Retention struct {
	MaxAge  Duration // records older than this are pruned
	MaxSize Size     // the store is pruned, oldest first, to stay under this
	Meta    Meta
}

// Sandbox lists the isolation layers that must be in place; see Layer*.
type Sandbox struct {
	// Require nil means every layer is required (fail closed). A non-nil
	// list, even an empty one, requires exactly those layers and accepts
	// that the others may be missing on this host.
	Require []string
	// WarmPool is how many sandboxes serve keeps prepared for the server
	// (sandbox.Pool): 0, the default, none. A server's own, if set,
	// replaces the top-level one (see Config.WarmPool).
	WarmPool int
	Meta     Meta
}

// MaxWarmPool bounds sandbox.warm_pool: each prepared sandbox holds
// memory whether it is used or not.
const MaxWarmPool = 64

// WarmPool is the warm pool of server s: its own sandbox.warm_pool if
// set, else the top level's.
func (c *Config) WarmPool(s *Server) int {
	if s != nil && s.Sandbox.Meta.Has("warm_pool") {
		return s.Sandbox.WarmPool
	}
	return c.Sandbox.WarmPool
}

// Server is one MCP server and the policy around it.
type Server struct {
	Name string // [a-z0-9][a-z0-9_-]{0,62}
	// Command is argv of a local server run in a sandbox. Exactly one of
	// Command and URL is set.
	Command []string
	// Package runs a registry package instead of a command (see
	// package.go); Image runs an OCI image (see image.go). Args go to the
	// package's bin, or replace the image's Cmd.
	Package string
	Image   ImageSource
	Args    []string
	// URL is the Streamable HTTP endpoint of a remote server, which runs
	// outside any sandbox; https, or http to a loopback host.
	URL string
	// Builtin names a server built into mcpbox (BuiltinWorkspace), run in
	// its sandbox like any other; exclusive with Command and URL.
	Builtin string
	// Commands is the built-in workspace server's run_command policy.
	Commands Commands
	// Placement is PlacementIsolated, "group:NAME" (one sandbox shared by
	// the servers of group NAME) or PlacementRemote. Empty: remote if URL is
	// set, else isolated.
	Placement string
	Scope     string // ScopeAgent (also the meaning of empty), ScopeSession or ScopeShared
	// Prefix is prepended to the server's tool and prompt names when the
	// gateway aggregates them; nil: "NAME__" when the config has more than
	// one server, else none (see EffectivePrefix).
	Prefix *string
	// Transport is how a remote server (url) is spoken to:
	// TransportStreamable (also the meaning of empty) or TransportSSE.
	Transport string
	// Headers are sent with every request to a remote server (url), e.g.
	// Authorization; their values come from secret references.
	Headers []Header
	// Query parameters are added to every request's URL to a remote
	// server (url), e.g. api_key; their values come from secret
	// references (Header.Name is the parameter's name).
	Query []Header
	// OAuth, if set, makes mcpbox the OAuth client of the remote server.
	OAuth      *ServerOAuth
	Filesystem Filesystem
	Env        []EnvVar // in file order
	Secrets    []Secret // in file order
	Network    Network
	Exec       Exec
	Limits     Limits
	Lifecycle  Lifecycle
	// Artifacts, if set, are copied out of the server's output when its
	// sandbox stops; nil: nothing is copied.
	Artifacts *Artifacts
	Pin       string // PinEnforce, PinTOFU (also the meaning of empty), PinWarn or PinOff
	// Scan is what a description-scanner finding in the server's tool,
	// prompt or template definitions does: ScanWarn (also the meaning of
	// empty) or ScanBlock (the definition is hidden and not callable).
	Scan string
	// ResultsScan is what an injection-like finding in a tool result does:
	// ResultsScanFlag (also the meaning of empty: logged and audited),
	// ResultsScanBlock (the result is replaced by an error) or ResultsScanOff.
	ResultsScan string
	// Credentials is what happens to a credential-shaped string (a private
	// key, a cloud or SaaS token format) in a tool result that is not one
	// of our secrets: CredentialsFlag (also the meaning of empty),
	// CredentialsRedact or CredentialsBlock.
	Credentials string
	Tools       Tools
	Sandbox     Sandbox // overrides the top-level Sandbox when Require is non-nil
	// Backend, if set, overrides the keys of the top-level Backend it
	// sets (Config.BackendOf).
	Backend *Backend
	Meta    Meta
}

// Commands decides which command lines the built-in workspace server runs:
// globs (path.Match) over the program's base name and over the argv
// joined by spaces. Deny wins, then Approve, then Allow; nothing is
// allowed by default.
type Commands struct {
	Allow, Deny, Approve []string
	// JobLifetime kills a background job (start_job) after this long;
	// zero: the built-in server's default (10m).
	JobLifetime Duration
	Meta        Meta
}

// BuiltinWorkspace is the built-in workspace server: files of
// /workspace/input and /workspace/output, and commands.
const BuiltinWorkspace = "workspace"

// Header is an HTTP header for a remote server.
type Header struct {
	Name string // an HTTP header name, or a URL query parameter's (Server.Query)
	From string // env:VAR, file:PATH or cmd:COMMAND; the header's value
	Meta Meta
}

// EffectivePrefix is the name prefix of server s in c.
func (c *Config) EffectivePrefix(s *Server) string {
	switch {
	case s.Prefix != nil:
		return *s.Prefix
	case len(c.Servers) > 1:
		return s.Name + "__"
	}
	return ""
}

// Filesystem is what the sandbox sees besides the minimal system view.
type Filesystem struct {
	Input  *Input  // nil: an empty /workspace/input
	Output *Output // nil: no /workspace/output mount; empty Source: a per-agent dir
	Tmp    Tmp
	Mounts []Mount
	// Template is a directory whose contents seed a new workspace; empty: none.
	Template string
	Meta     Meta
}

// Input is mounted at /workspace/input.
type Input struct {
	Source string // host directory; required
	Mode   string // ModeRO (also the meaning of empty) or ModeOverlay (writable, changes discarded)
	// Size bounds the overlay's changes (its upper dir on the host); zero:
	// no limit. Only with ModeOverlay.
	Size Size
	Meta Meta
}

// Output is mounted read-write at /workspace/output.
type Output struct {
	Source string // host directory; empty: a per-agent dir under the state dir
	Size   Size   // bytes the dir may hold on the host; zero: no limit
	Meta   Meta
}

// Tmp is the tmpfs at /tmp.
type Tmp struct {
	Size Size // zero: the sandbox default
	Meta Meta
}

// Mount is an extra bind mount.
type Mount struct {
	Source string // host path
	Target string // absolute, clean path in the sandbox; see ReservedTargets
	Mode   string // ModeRO (also the meaning of empty) or ModeRW
	// Git, with Mode ModeRW, is ModeRO (also the meaning of empty): what
	// git reads of the repositories at, directly in and above Source
	// (.git, hooks, included config, submodules) stays read-only in the
	// sandbox, or ModeRW: writable like the rest.
	Git  string
	Meta Meta
}

// EnvVar is one environment variable given to the server.
type EnvVar struct {
	Name, Value string
	Pos         Pos // where Name is
}

// Secret is a credential injected into the server's sandbox.
type Secret struct {
	Name string   // [A-Za-z_][A-Za-z0-9_]*: the env var or /run/secrets file name
	From string   // env:VAR, file:PATH or cmd:COMMAND; never the value itself
	As   string   // SecretAsEnv (also the meaning of empty) or SecretAsFile
	TTL  Duration // re-read the source after TTL; zero: read once per sandbox
	// Inject, if set, keeps the value out of the sandbox: it holds a
	// placeholder, and the egress proxy adds the value (inject.go).
	Inject *Inject
	Meta   Meta
}

// Network is the server's network policy; the zero value has no network.
type Network struct {
	Egress  []Egress
	Forward []Forward
	Limits  NetworkLimits
	Meta    Meta
}

// NetworkLimits bound the egress proxy's connections for one sandbox. A
// zero field means the proxy's default (see package egress).
type NetworkLimits struct {
	Connections        int      // concurrent connections
	BytesPerConnection Size     // both directions together
	BytesTotal         Size     // over the sandbox's life
	Idle               Duration // a connection with no traffic is closed
	MaxDuration        Duration // any connection is closed
	Meta               Meta
}

// Egress allows connections through the egress proxy.
type Egress struct {
	// Host is a host name, "*.suffix" (any name strictly below suffix), "*"
	// (any host), or an IPv4/IPv6 literal. The proxy still refuses private,
	// loopback and link-local addresses unless CIDR covers them.
	Host string
	// Ports are allowed destination ports; empty: 443 and 80 (DefaultEgressPorts).
	Ports []int
	// CIDR, with Host: the addresses Host may resolve to, which may then be
	// private. Without Host: connections to IP addresses in CIDR.
	CIDR string
	Meta Meta
}

// DefaultEgressPorts are the ports of an Egress rule that lists none.
var DefaultEgressPorts = []int{443, 80}

// Forward makes a TCP port inside the sandbox reach a fixed destination.
type Forward struct {
	Listen string // loopback IP:PORT inside the sandbox
	To     string // HOST:PORT outside
	Meta   Meta
}

// Exec controls which files may be executed.
type Exec struct {
	// Allow are absolute paths in the sandbox that may be executed even
	// though they are on a writable mount.
	Allow []string
	// Writable allows executing anything on writable mounts (--exec-writable).
	Writable bool
	Meta     Meta
}

// Limits are resource limits; zero fields mean the sandbox default.
type Limits struct {
	Memory      Size
	Pids        int
	CPU         float64 // CPUs, (0, 1024]
	CallTimeout Duration
	Output      Size // largest tool result passed back
	Meta        Meta
}

// Lifecycle says when an idle or old sandbox is paused, stopped or restarted.
// Zero durations mean "never".
type Lifecycle struct {
	Idle        Duration
	IdleAction  string   // IdleActionPause (also the meaning of empty) or IdleActionStop
	IdleStop    Duration // with IdleActionPause: stop after this long idle; > Idle
	MaxLifetime Duration
	Restart     string // RestartNo, RestartOnFailure (also the meaning of empty) or RestartAlways
	Meta        Meta
}

// EffectiveRestart is the restart policy: a crashed server is restarted
// unless the config says `restart: no`.
func (l Lifecycle) EffectiveRestart() string {
	if l.Restart == "" {
		return RestartOnFailure
	}
	return l.Restart
}

// Artifacts says which files of /workspace/output are copied out when a
// sandbox stops: regular files only, never through a symlink.
type Artifacts struct {
	Dir     string   // host dir; each sandbox's files go to DIR/AGENT/SERVER/SANDBOX-ID/
	Include []string // globs over paths relative to the output dir; "**" crosses dirs
	MaxSize Size     // per file; zero: 64Mi
	Meta    Meta
}

// Tools is the tool policy. The zero value allows no tool (default deny).
type Tools struct {
	Allow   []string // tool name globs (path.Match syntax)
	Deny    []string
	Approve []string // allowed after human review
	Rules   []Rule
	// Default is the action for a call that no rule or glob decides:
	// ActionDeny (also the meaning of empty), ActionAllow or ActionApprove.
	Default string
	// ApproveAnnotations are the tool annotations that add human review
	// when they are true for a tool, which is also when the tool leaves
	// them out, as MCP's defaults say (AnnotationDestructive,
	// AnnotationOpenWorld; internal/policy has the details); nil: both.
	// They never turn a deny or an approve into allow.
	ApproveAnnotations []string
	// RateLimit limits calls to this server; zero: unlimited.
	RateLimit RateLimit
	Meta      Meta
}

// Rule decides calls of matching tools for which When holds.
type Rule struct {
	Tool   string // glob
	When   string // condition over the call (evaluated by the policy package); empty: always
	Action string // ActionAllow, ActionDeny or ActionApprove
	Meta   Meta
}

// RateLimit bounds the call rate.
type RateLimit struct {
	PerMinute int // calls per minute to the server, all clients and tools together; zero: unlimited
	// PerClientTool is calls per minute of one client to one tool; zero: unlimited.
	PerClientTool int
	// Burst is how many calls may come at once (the token buckets' size);
	// zero: the per-minute figure itself.
	Burst int
	Meta  Meta
}

// Enumerated values.
const (
	PlacementIsolated = "isolated"
	PlacementRemote   = "remote"
	PlacementGroup    = "group:" // prefix of "group:NAME"

	ScopeAgent   = "agent"
	ScopeSession = "session"
	ScopeShared  = "shared"

	ModeRO      = "ro"
	ModeRW      = "rw"
	ModeOverlay = "overlay"

	SecretAsEnv  = "env"
	SecretAsFile = "file"

	IdleActionPause = "pause"
	IdleActionStop  = "stop"

	RestartNo        = "no"
	RestartOnFailure = "on-failure"
	RestartAlways    = "always"

	PinEnforce = "enforce"
	PinTOFU    = "tofu"
	PinWarn    = "warn"
	PinOff     = "off"

	ScanWarn  = "warn"
	ScanBlock = "block"

	ResultsScanOff   = "off"
	ResultsScanFlag  = "flag"
	ResultsScanBlock = "block"

	AnnotationDestructive = "destructiveHint"
	AnnotationOpenWorld   = "openWorldHint"

	CredentialsFlag   = "flag"
	CredentialsRedact = "redact"
	CredentialsBlock  = "block"

	ActionAllow   = "allow"
	ActionDeny    = "deny"
	ActionApprove = "approve"

	AuditStoreSQLite = "sqlite"

	// AuditRefuse refuses calls while the audit store cannot write, and
	// withholds the result of a call whose record was not committed.
	AuditRefuse = "refuse"
	// AuditAllow passes such calls and results on, unaudited, and logs it.
	AuditAllow = "allow"
)

// Isolation layers named in sandbox.require.
const (
	LayerUserns   = "userns"
	LayerMountns  = "mountns"
	LayerPidns    = "pidns"
	LayerNetns    = "netns"
	LayerSeccomp  = "seccomp"
	LayerLandlock = "landlock"
	LayerCgroups  = "cgroups"
	LayerIDMap    = "idmap"
)

// AllLayers returns every isolation layer name.
func AllLayers() []string {
	return []string{LayerUserns, LayerMountns, LayerPidns, LayerNetns, LayerSeccomp, LayerLandlock, LayerCgroups, LayerIDMap}
}

// Approval channels.
const (
	ChannelElicitation = "elicitation"
	ChannelCLI         = "cli"
	ChannelWeb         = "web"
)

// PinMode is the server's pin in effect: its pin, else PinOff for a
// built-in server (mcpbox's own, which changes only with mcpbox), else
// PinTOFU.
func (s *Server) PinMode() string {
	switch {
	case s.Pin != "":
		return s.Pin
	case s.Builtin != "":
		return PinOff
	}
	return PinTOFU
}
