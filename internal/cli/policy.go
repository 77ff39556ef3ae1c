package cli

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/policy"
	"mcpbox/internal/sandbox"
)

const policyHelp = `USAGE
  mcpbox policy check FILE

Parses and validates a config file. Every problem is printed as
FILE:LINE:COL: message; the exit status is 1 when there is any. Things a
reviewer should see in a valid config (a server with no tools: key, whose
tools are all hidden, a credential in plain env, one secret shared by
several servers, secrets beside broad egress) are printed as
FILE:LINE:COL: warning: message, with exit status 0.
`

func (e *env) policy(args []string) int {
	fs := e.newFlagSet("policy", policyHelp)
	if code, stop := e.parse(fs, args); stop {
		return code
	}
	rest := fs.Args()
	if len(rest) != 2 || rest[0] != "check" {
		e.errorf("policy: usage: mcpbox policy check FILE")
		return exitUsage
	}
	c, err := loadConfig(rest[1])
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return 1
	}
	// The rules' conditions are compiled and type-checked here, where
	// config.Load only checked that they are there.
	src, _ := os.ReadFile(rest[1])
	if _, err := policy.CompileWith(c, policy.Options{Source: src}); err != nil {
		fmt.Fprintln(e.stderr, err)
		return 1
	}
	for _, w := range config.Warnings(c) {
		fmt.Fprintf(e.stderr, "%s:%d:%d: warning: %s\n", w.File, w.Line, w.Col, w.Msg)
	}
	fmt.Fprintf(e.stdout, "%s: ok\n", rest[1])
	return 0
}

// loadConfig reads, parses and validates a config file.
func loadConfig(path string) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return config.Load(path, data)
}

// specFromPolicy fills spec with the sandbox policy of the first server in
// the config at path. Relative paths are resolved against the config's
// directory, "~/" against $HOME.
func specFromPolicy(path string, spec *sandbox.Spec) error {
	c, err := loadConfig(path)
	if err != nil {
		return err
	}
	if len(c.Servers) == 0 {
		return fmt.Errorf("%s: no servers: --policy uses the first server's policy", path)
	}
	s := c.Servers[0]
	if s.URL != "" {
		return fmt.Errorf("%s: server %s is remote (url): there is nothing to sandbox", path, s.Name)
	}
	if s.Filesystem.Input != nil && s.Filesystem.Input.Mode == config.ModeOverlay {
		return fmt.Errorf("server %s: filesystem.input.mode overlay needs a workspace for its changes: use mcpbox serve", s.Name)
	}
	if err := serverSpec(c, s, filepath.Dir(path), spec); err != nil {
		return err
	}
	for _, sec := range s.Secrets {
		if sec.TTL != 0 {
			return fmt.Errorf("server %s: secret %s: ttl (refreshing a running sandbox) needs the gateway; mcpbox exec resolves secrets once", s.Name, sec.Name)
		}
		v, err := resolveSecret(sec.Name, sec.From, sec.As == config.SecretAsFile)
		if err != nil {
			return fmt.Errorf("server %s: secret %s: %w", s.Name, sec.Name, err)
		}
		spec.Secrets = append(spec.Secrets, v)
	}
	return nil
}

// serverSpec fills spec with server s's sandbox policy, paths resolved
// against base; secrets are left to the caller, which resolves them when
// the sandbox starts. An output without a source, and the overlay of an
// input with mode overlay, are left to the caller too (they are per
// workspace).
func serverSpec(c *config.Config, s *config.Server, base string, spec *sandbox.Spec) error {
	var err error
	fsys := s.Filesystem
	// Sources in the config's dir or the input are walked without
	// symlinks (hostSource); writable ones must avoid protected places.
	if fsys.Input != nil {
		if spec.Input, err = hostSourceDir(base, "", fsys.Input.Source, 0); err != nil {
			return fmt.Errorf("server %s: filesystem.input: %w", s.Name, err)
		}
	}
	protected := protectedPlaces(spec.Input, configStateDir(c, base))
	if fsys.Output != nil && fsys.Output.Source != "" {
		if spec.Output, err = outputDir(base, spec.Input, fsys.Output.Source, 0o755, protected); err != nil {
			return fmt.Errorf("server %s: filesystem.output: %w", s.Name, err)
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
		mode := m.Mode
		if mode == "" {
			mode = config.ModeRO
		}
		src, err := hostSource(base, spec.Input, m.Source, 0)
		if err != nil {
			return fmt.Errorf("server %s: mount %s: %w", s.Name, m.Target, err)
		}
		mnt, err := parseMount(src + ":" + m.Target + ":" + mode)
		if err == nil && mnt.Writable {
			err = protected.Check(mnt.Source)
		}
		if err != nil {
			return fmt.Errorf("server %s: mount %s: %w", s.Name, m.Target, err)
		}
		spec.Mounts = append(spec.Mounts, mnt)
	}
	for _, v := range s.Env {
		spec.Env = append(spec.Env, v.Name+"="+v.Value)
	}
	for _, eg := range s.Network.Egress {
		r := egress.Rule{Host: eg.Host, Ports: eg.Ports}
		if eg.CIDR != "" {
			if r.CIDR, err = netip.ParsePrefix(eg.CIDR); err != nil {
				return fmt.Errorf("server %s: egress cidr %q: %w", s.Name, eg.CIDR, err)
			}
		}
		spec.Network.Rules = append(spec.Network.Rules, r)
	}
	for _, f := range s.Network.Forward {
		spec.Network.Forwards = append(spec.Network.Forwards, egress.Forward{Listen: f.Listen, To: f.To})
	}
	nl := s.Network.Limits
	spec.Network.Limits = egress.Limits{
		MaxConns: nl.Connections, MaxBytesPerConn: int64(nl.BytesPerConnection), MaxBytesTotal: int64(nl.BytesTotal),
		IdleTimeout: time.Duration(nl.Idle), MaxDuration: time.Duration(nl.MaxDuration),
	}
	spec.ExecAllow = s.Exec.Allow
	spec.ExecWritable = s.Exec.Writable
	l := serverLimits(s)
	spec.Limits.Memory, spec.Limits.Pids, spec.Limits.CPU = l.Memory, l.Pids, l.CPU
	return requireLayers(c, s, spec)
}

// requireLayers turns the server's required layers into the layers the
// spec may lose. Namespace layers are never optional in the sandbox, so
// listing or omitting them changes nothing.
func requireLayers(c *config.Config, s *config.Server, spec *sandbox.Spec) error {
	need := map[sandbox.Layer]bool{}
	for _, r := range c.RequiredLayers(s) {
		need[sandbox.Layer(r)] = true
	}
	for _, l := range sandbox.AllLayers {
		if !need[l] {
			spec.AllowDegraded = append(spec.AllowDegraded, l)
		}
	}
	return nil
}

func resolve(base, p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}
