package sandbox

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox/initproc"
)

// Paths inside every sandbox.
const (
	InputDir    = initproc.InputDir
	OutputDir   = "/workspace/output"
	sandboxPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// DefaultPATH is the workload's PATH unless its environment sets one:
	// directories of the host's read-only system view (without an image).
	DefaultPATH = sandboxPATH
)

// allBinds lists the workspace mounts and the extra ones, in mount order.
func (s *Spec) allBinds() []Mount {
	var ms []Mount
	if s.Input != "" {
		// An overlaid input is writable: not executable unless
		// ExecWritable, like the other writable mounts.
		ov := s.InputOverlay != nil
		ms = append(ms, Mount{Source: s.Input, Target: InputDir, Writable: ov, Exec: !ov})
	}
	if s.Output != "" {
		ms = append(ms, Mount{Source: s.Output, Target: OutputDir, Writable: true})
	}
	ms = append(ms, s.Mounts...)
	for i := range ms {
		if ms[i].Writable && s.ExecWritable {
			ms[i].Exec = true
		}
	}
	return ms
}

// InputMasks lists the sources of the writable binds (Output, writable
// Mounts) that lie strictly inside Input, as clean slash-separated paths
// relative to it, sorted. The sandbox covers each with an empty read-only
// tmpfs in the input view (maskInput): otherwise the workload would see
// its output twice, and with an input overlay it could write the output
// through the overlay (the change would land in the upper layer, and the
// lower layer would change under a mounted overlay, which overlayfs
// leaves undefined). Sources are absolute and symlink-free (Mount), so the
// relation is one of paths.
func (s *Spec) InputMasks() []string {
	if s.Input == "" {
		return nil
	}
	var out []string
	for _, m := range s.allBinds() {
		if !m.Writable || m.Target == InputDir || m.Source == s.Input || !within(m.Source, s.Input) {
			continue
		}
		rel := strings.TrimPrefix(m.Source, strings.TrimSuffix(s.Input, "/")+"/")
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// workdir is the workload's starting directory.
func (s *Spec) workdir() string {
	switch {
	case s.Dir != "":
		return s.Dir
	case s.Output != "":
		return OutputDir
	default:
		return "/workspace"
	}
}

// environ is the workload's whole environment: the basics, a few harmless
// host values that make terminals work, then the Spec's own variables.
func (s *Spec) environ() []string {
	env := []string{
		"PATH=" + sandboxPATH,
		"HOME=" + sandboxHome,
		"TMPDIR=/tmp",
		"USER=" + sandboxUser,
		"LOGNAME=" + sandboxUser,
		"LANG=" + hostOr("LANG", "C.UTF-8"),
	}
	if t := os.Getenv("TERM"); t != "" {
		env = append(env, "TERM="+t)
	}
	if s.Network.Enabled() {
		env = append(env, proxyEnv(s.Network.Rules, s.Network.Forwards)...)
	}
	var secrets []string
	for _, sec := range s.Secrets {
		if !sec.AsFile {
			secrets = append(secrets, sec.Name+"="+string(sec.Value))
		}
	}
	return mergeEnv(mergeEnv(env, s.Env), secrets)
}

func hostOr(key, def string) string {
	if v := os.Getenv(key); v != "" && !strings.ContainsAny(v, "\x00\n") {
		return v
	}
	return def
}

// mergeEnv appends over to base, later keys replacing earlier ones.
func mergeEnv(base, over []string) []string {
	out := make([]string, 0, len(base)+len(over))
	idx := map[string]int{}
	for _, kv := range append(append([]string{}, base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// landlockRules is the workload's filesystem allowlist: read everything in
// the (already minimal) root, execute only from system dirs, read-only
// mounts and exec.allow paths, write only to /tmp, /dev and rw mounts.
func (s *Spec) landlockRules(system []string) []pathRule {
	rules := []pathRule{
		{Path: "/", Read: true},
		{Path: "/dev", Read: true, Write: true, Ioctl: true},
		{Path: "/tmp", Read: true, Write: true, Exec: s.ExecWritable},
	}
	for _, p := range system {
		rules = append(rules, pathRule{Path: p, Read: true, Exec: true})
	}
	for _, m := range s.allBinds() {
		rules = append(rules, pathRule{Path: m.Target, Read: true, Write: m.Writable, Exec: m.Exec})
	}
	for _, p := range s.ExecAllow {
		rules = append(rules, pathRule{Path: p, Read: true, Exec: true, Optional: true})
	}
	return rules
}

// proxyEnv points the common runtimes at the in-sandbox proxy, in both
// cases: curl reads only the lower-case http_proxy, others only upper case.
// all_proxy is SOCKS5 with names resolved by the proxy (the sandbox has no
// DNS). Loopback names stay direct (the sandbox's own services), except
// those a rule names: "--allow-host 127.0.0.1:8080" means the host's.
func proxyEnv(rules []egress.Rule, forwards []egress.Forward) []string {
	url := "http://" + proxyAddr
	var env []string
	for _, k := range []string{"http_proxy", "https_proxy"} {
		env = append(env, k+"="+url, strings.ToUpper(k)+"="+url)
	}
	var direct []string
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if !namedByRule(h, rules) {
			direct = append(direct, h)
		}
	}
	// A forward's listener is inside the sandbox: a client must reach it
	// directly, not ask the proxy for it (which refuses 127.0.0.2:8080
	// unless a rule happens to name it), so its IP goes in NO_PROXY too,
	// unless a rule names that IP (the proxy is then its way out).
	for _, f := range forwards {
		h, _, err := net.SplitHostPort(f.Listen)
		if err != nil || slices.Contains(direct, h) || namedByRule(h, rules) {
			continue
		}
		if ip, err := netip.ParseAddr(h); err == nil && ip.IsLoopback() {
			direct = append(direct, ip.String())
		}
	}
	noProxy := strings.Join(direct, ",")
	return append(env,
		"all_proxy=socks5h://"+proxyAddr, "ALL_PROXY=socks5h://"+proxyAddr,
		"no_proxy="+noProxy, "NO_PROXY="+noProxy,
		"NODE_USE_ENV_PROXY=1",
		"npm_config_proxy="+url, "npm_config_https_proxy="+url,
	)
}

// namedByRule reports whether a rule names loopback host h (by name, by
// address, or by a CIDR covering it).
func namedByRule(h string, rules []egress.Rule) bool {
	ip, _ := netip.ParseAddr(h)
	for _, r := range rules {
		if strings.EqualFold(r.Host, h) || ip.IsValid() && (r.CIDR.IsValid() && r.CIDR.Contains(ip) || r.Host == ip.String()) {
			return true
		}
	}
	return false
}

// secretFiles lists the secrets the init writes to /run/secrets.
func (s *Spec) secretFiles() []secretFile {
	var out []secretFile
	for _, sec := range s.Secrets {
		if sec.AsFile {
			out = append(out, secretFile{Name: sec.Name, Value: sec.Value})
		}
	}
	return out
}

// checkSecrets rejects names that are not plain identifiers (they become
// file names and variable names) and names given twice or also in Env.
func (s *Spec) checkSecrets() error {
	seen := map[string]bool{}
	for _, kv := range s.Env {
		k, _, _ := strings.Cut(kv, "=")
		seen[k] = true
	}
	for _, sec := range s.Secrets {
		if !validSecretName(sec.Name) {
			return fmt.Errorf("secret name %q: want letters, digits and _, not starting with a digit", sec.Name)
		}
		if seen[sec.Name] {
			return fmt.Errorf("secret %s: the name is already set in the environment or given twice", sec.Name)
		}
		seen[sec.Name] = true
	}
	return nil
}

func validSecretName(n string) bool {
	if n == "" {
		return false
	}
	for i, c := range n {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
