package specconv

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/workspace"
)

// Options say where a config's relative paths lead and what its sandboxes
// must not reach.
type Options struct {
	// Base is the dir relative paths of the config are resolved against:
	// the config file's dir, or the working dir for the embedded default.
	// If "", it is ".".
	Base string
	// StateDir is the state dir in use (made already): a spec that would
	// show it in the sandbox, or put a host dir of the sandbox inside it,
	// is refused. Required: Server and Group fail without it.
	StateDir string
	// Packages are the installed packages of package servers, by server
	// name (see Package); a package server missing here is refused.
	Packages map[string]Package
	// Protected are host files and dirs that no writable mount (the
	// output, an rw mount) may be or contain: the lock file's dir, the
	// config, the audit's JSONL copy (ProtectedFiles). If nil, none are.
	Protected []string
}

// base is Base, "." if empty.
func (o Options) base() string {
	if o.Base == "" {
		return "."
	}
	return o.Base
}

// Server is the spec of local server s of config c, complete but for its
// secrets (resolved when the sandbox starts), an output without a source
// and the overlay of an input with mode overlay (both per workspace). The
// built-in server runs mcpbox's own binary.
func Server(c *config.Config, s *config.Server, o Options) (sandbox.Spec, error) {
	var spec sandbox.Spec
	if err := InputHidesState(s, o); err != nil {
		return spec, err
	}
	if err := serverSpec(c, s, o.base(), &spec); err != nil {
		return spec, err
	}
	if err := checkReach(&spec, o); err != nil {
		return spec, fmt.Errorf("server %s: %w", s.Name, err)
	}
	spec.Args = s.Command
	if err := packageSpec(s, o, &spec); err != nil {
		return spec, err
	}
	if s.Builtin != "" {
		if err := builtinSpec(s, &spec); err != nil {
			return spec, fmt.Errorf("server %s: %w", s.Name, err)
		}
	}
	return spec, nil
}

// Policy is the spec of the first server of config c, read from path,
// for exec --policy and run --policy: its sandbox policy with paths
// resolved against path's dir, but not its command. It returns the
// server's secrets for the caller to resolve, once: what needs the
// gateway (a ttl, an overlay's workspace) is refused.
func Policy(c *config.Config, path string) (sandbox.Spec, []config.Secret, error) {
	var spec sandbox.Spec
	if len(c.Servers) == 0 {
		return spec, nil, fmt.Errorf("%s: no servers: --policy uses the first server's policy", path)
	}
	s := c.Servers[0]
	if s.URL != "" {
		return spec, nil, fmt.Errorf("%s: server %s is remote (url): there is nothing to sandbox", path, s.Name)
	}
	if s.Filesystem.Input != nil && s.Filesystem.Input.Mode == config.ModeOverlay {
		return spec, nil, fmt.Errorf("server %s: filesystem.input.mode overlay needs a workspace for its changes: use mcpbox serve", s.Name)
	}
	if err := serverSpec(c, s, filepath.Dir(path), &spec); err != nil {
		return spec, nil, err
	}
	if err := hideHome(&spec); err != nil {
		return spec, nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	for _, sec := range s.Secrets {
		if sec.TTL != 0 {
			return spec, nil, fmt.Errorf("server %s: secret %s: ttl (refreshing a running sandbox) needs the gateway; mcpbox exec resolves secrets once", s.Name, sec.Name)
		}
	}
	return spec, s.Secrets, nil
}

// serverSpec fills spec with server s's sandbox policy, paths resolved
// against base; secrets are left to the caller, which resolves them when
// the sandbox starts. An output without a source, and the overlay of an
// input with mode overlay, are left to the caller too (they are per
// workspace).
func serverSpec(c *config.Config, s *config.Server, base string, spec *sandbox.Spec) error {
	if err := filesystemSpec(c, s, base, spec); err != nil {
		return err
	}
	for _, v := range s.Env {
		spec.Env = append(spec.Env, v.Name+"="+v.Value)
	}
	if err := networkSpec(s, spec); err != nil {
		return err
	}
	spec.ExecAllow = s.Exec.Allow
	spec.ExecWritable = s.Exec.Writable
	l := Limits(s)
	spec.Limits.Memory, spec.Limits.Pids, spec.Limits.CPU = l.Memory, l.Pids, l.CPU
	requireLayers(c, s, spec)
	return nil
}

// filesystemSpec fills spec's input, output, mounts and their size
// limits. Sources in the config's dir or the input are walked without
// symlinks (hostSource); writable ones must avoid protected places.
func filesystemSpec(c *config.Config, s *config.Server, base string, spec *sandbox.Spec) error {
	var err error
	fsys := s.Filesystem
	if fsys.Input != nil {
		if spec.Input, err = hostSourceDir(base, "", fsys.Input.Source, 0); err != nil {
			return fmt.Errorf("server %s: filesystem.input: %w", s.Name, linkAdvice(err, "filesystem.input.source"))
		}
	}
	protected := protectedPlaces(base, spec.Input, configStateDir(c, base))
	if fsys.Output != nil && fsys.Output.Source != "" {
		if spec.Output, err = outputDir(base, spec.Input, fsys.Output.Source, 0o755, protected); err != nil {
			return fmt.Errorf("server %s: filesystem.output: %w", s.Name, linkAdvice(err, "filesystem.output.source"))
		}
	}
	spec.Limits.TmpSize = int64(fsys.Tmp.Size)
	if fsys.Output != nil {
		spec.Limits.OutputSize = int64(fsys.Output.Size)
	}
	if fsys.Input != nil {
		spec.Limits.InputSize = int64(fsys.Input.Size)
	}
	for _, m := range fsys.Mounts {
		mnt, err := configMount(base, spec.Input, m)
		if err == nil && mnt.Writable {
			// As written too, as an output is: the real path of a
			// linked dotfile may lie anywhere.
			err = checkWritten(protected, base, m.Source, mnt.Source)
		}
		if err != nil {
			return fmt.Errorf("server %s: mount %s: %w", s.Name, m.Target, linkAdvice(err, "the mount's source"))
		}
		spec.Mounts = append(spec.Mounts, mnt)
	}
	return nil
}

// linkAdvice adds to a refused symlink what to do: a repository can ship
// a source dir as a link (to ~/.ssh, say), so say so, not only what was
// refused; where names the key to set instead. Other errors are err.
func linkAdvice(err error, where string) error {
	if !errors.Is(err, workspace.ErrSymlink) {
		return err
	}
	return fmt.Errorf("%w; if you did not make that link, it came with the project: "+
		"look at it, remove the link (not what it points to) and start again, or set %s to a directory", err, where)
}

// configMount is the sandbox mount of a config mount, built from its
// fields: a source name may hold any character, ":" too (only the --mount
// flag's SRC:DST[:MODE] syntax splits on it).
func configMount(base, in string, m config.Mount) (sandbox.Mount, error) {
	src, err := hostSource(base, in, m.Source, 0)
	if err != nil {
		return sandbox.Mount{}, err
	}
	mnt := sandbox.Mount{Source: src, Target: m.Target}
	switch m.Mode {
	case "", config.ModeRO:
	case config.ModeRW:
		mnt.Writable = true
	default:
		return mnt, fmt.Errorf("mode %q: want ro or rw", m.Mode)
	}
	mnt.Exec = !mnt.Writable
	mnt.KeepGit = mnt.Writable && m.Git == config.ModeRW
	if err := config.CheckMountTarget(m.Target); err != nil {
		return mnt, fmt.Errorf("target: %w", err)
	}
	return mnt, nil
}

// networkSpec fills spec's egress rules, forwards and connection limits.
func networkSpec(s *config.Server, spec *sandbox.Spec) error {
	rules, limits, err := EgressPolicy(s)
	if err != nil {
		return err
	}
	spec.Network.Rules, spec.Network.Limits = rules, limits
	for _, f := range s.Network.Forward {
		spec.Network.Forwards = append(spec.Network.Forwards, egress.Forward{Listen: f.Listen, To: f.To})
	}
	return nil
}

// EgressPolicy is server s's egress allowlist and the limits of its
// proxy, as the local sandbox's proxy and the pods' shared one apply them.
func EgressPolicy(s *config.Server) ([]egress.Rule, egress.Limits, error) {
	var rules []egress.Rule
	for _, eg := range s.Network.Egress {
		r := egress.Rule{Host: eg.Host, Ports: eg.Ports}
		if eg.CIDR != "" {
			var err error
			if r.CIDR, err = netip.ParsePrefix(eg.CIDR); err != nil {
				return nil, egress.Limits{}, fmt.Errorf("server %s: egress cidr %q: %w", s.Name, eg.CIDR, err)
			}
		}
		rules = append(rules, r)
	}
	nl := s.Network.Limits
	return rules, egress.Limits{
		MaxConns: nl.Connections, MaxBytesPerConn: int64(nl.BytesPerConnection), MaxBytesTotal: int64(nl.BytesTotal),
		IdleTimeout: time.Duration(nl.Idle), MaxDuration: time.Duration(nl.MaxDuration),
	}, nil
}

// requireLayers turns the server's required layers into the layers the
// spec may lose. Namespace layers are never optional in the sandbox, so
// listing or omitting them changes nothing.
func requireLayers(c *config.Config, s *config.Server, spec *sandbox.Spec) {
	need := map[sandbox.Layer]bool{}
	for _, r := range c.RequiredLayers(s) {
		need[sandbox.Layer(r)] = true
	}
	for _, l := range sandbox.AllLayers {
		if !need[l] {
			spec.AllowDegraded = append(spec.AllowDegraded, l)
		}
	}
}

// Defaults of a sandbox's limits that neither its flags nor its config
// give: generous for node/python servers, small enough that a runaway
// process cannot hurt the host.
const (
	DefaultMemory = "1Gi"
	DefaultPids   = 512
)

// DefaultLimits are the memory and pids limits of a sandbox whose flags
// and policy leave them out (DefaultMemory, DefaultPids).
func DefaultLimits() (memory, pids int64) {
	m, _ := config.ParseSize(DefaultMemory)
	return int64(m), DefaultPids
}

// Limits are the cgroup limits of server s's sandbox: the config's, or
// the defaults for the ones it leaves out.
func Limits(s *config.Server) sandbox.Limits {
	var l sandbox.Limits
	l.Memory, l.Pids = DefaultLimits()
	if s.Limits.Memory != 0 {
		l.Memory = int64(s.Limits.Memory)
	}
	if s.Limits.Pids != 0 {
		l.Pids = int64(s.Limits.Pids)
	}
	l.CPU = s.Limits.CPU
	return l
}
