package config

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Marshal prints c as YAML that Parse reads back to an equal Config
// (positions aside). Keys come in the order of the design document; zero
// values are left out, except present-but-empty lists and the input and
// output mappings, whose presence means something.
func (c *Config) Marshal() ([]byte, error) {
	m := mapNode()
	if c.Version != 0 {
		addInt(m, "version", c.Version)
	}
	addStr(m, "state_dir", c.StateDir)
	add(m, "listen", listenNode(&c.Listen))
	if c.Clients != nil {
		l := listNode(false)
		for i := range c.Clients {
			l.Content = append(l.Content, clientNode(&c.Clients[i]))
		}
		addKV(m, "clients", flowIfEmpty(l))
	}
	if c.Servers != nil {
		sm := mapNode()
		for i, s := range c.Servers {
			if s == nil {
				return nil, fmt.Errorf("encoding config: servers[%d] is nil", i)
			}
			addKV(sm, s.Name, serverNode(s))
		}
		addKV(m, "servers", flowIfEmpty(sm))
	}
	add(m, "sandbox", sandboxNode(&c.Sandbox))
	add(m, "approvals", approvalsNode(&c.Approvals))
	add(m, "audit", auditNode(&c.Audit))
	add(m, "oauth", oauthNode(&c.OAuth))
	add(m, "backend", backendNode(&c.Backend))

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	return buf.Bytes(), nil
}

func mapNode() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

func listNode(flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return n
}

func scalar(tag, v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v}
}

// flowIfEmpty prints an empty mapping or list as {} or [].
func flowIfEmpty(n *yaml.Node) *yaml.Node {
	if len(n.Content) == 0 {
		n.Style = yaml.FlowStyle
	}
	return n
}

func addKV(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, scalar("!!str", key), v)
}

// add adds a mapping value unless it is empty.
func add(m *yaml.Node, key string, v *yaml.Node) {
	if len(v.Content) > 0 {
		addKV(m, key, v)
	}
}

func addStr(m *yaml.Node, key, v string) {
	if v != "" {
		addKV(m, key, scalar("!!str", v))
	}
}

func addInt(m *yaml.Node, key string, v int) {
	addKV(m, key, scalar("!!int", strconv.Itoa(v)))
}

func addNonZeroInt(m *yaml.Node, key string, v int) {
	if v != 0 {
		addInt(m, key, v)
	}
}

func addBool(m *yaml.Node, key string, v bool) {
	if v {
		addKV(m, key, scalar("!!bool", "true"))
	}
}

func addSize(m *yaml.Node, key string, v Size) {
	if v != 0 {
		addKV(m, key, scalar("!!str", v.String()))
	}
}

func addDuration(m *yaml.Node, key string, v Duration) {
	if v != 0 {
		addKV(m, key, scalar("!!str", v.String()))
	}
}

// addStrs adds a list of strings unless it is nil.
func addStrs(m *yaml.Node, key string, vs []string) {
	if vs == nil {
		return
	}
	l := listNode(true)
	for _, v := range vs {
		l.Content = append(l.Content, scalar("!!str", v))
	}
	addKV(m, key, l)
}

func listenNode(l *Listen) *yaml.Node {
	h := mapNode()
	addStr(h, "addr", l.HTTP.Addr)
	addStrs(h, "allowed_origins", l.HTTP.AllowedOrigins)
	t := mapNode()
	addStr(t, "cert", l.HTTP.TLS.Cert)
	addStr(t, "key", l.HTTP.TLS.Key)
	add(h, "tls", t)
	if l.HTTP.OAuth != nil {
		addKV(h, "oauth", httpOAuthNode(l.HTTP.OAuth))
	}
	m := mapNode()
	add(m, "http", h)
	return m
}

func clientNode(c *Client) *yaml.Node {
	m := mapNode()
	addStr(m, "name", c.Name)
	t := mapNode()
	addStr(t, "from", c.Token.From)
	add(m, "token", t)
	addStr(m, "role", c.Role)
	ct := mapNode()
	addStrs(ct, "allow", c.Tools.Allow)
	addStrs(ct, "deny", c.Tools.Deny)
	addStrs(ct, "approve", c.Tools.Approve)
	add(m, "tools", ct)
	return flowIfEmpty(m)
}

func sandboxNode(s *Sandbox) *yaml.Node {
	m := mapNode()
	addStrs(m, "require", s.Require)
	if s.Meta.Has("warm_pool") || s.WarmPool != 0 {
		addInt(m, "warm_pool", s.WarmPool)
	}
	return m
}

func approvalsNode(a *Approvals) *yaml.Node {
	m := mapNode()
	addDuration(m, "timeout", a.Timeout)
	addStrs(m, "channels", a.Channels)
	return m
}

func auditNode(a *Audit) *yaml.Node {
	m := mapNode()
	addStr(m, "store", a.Store)
	addStr(m, "jsonl", a.JSONL)
	addBool(m, "include_payloads", a.IncludePayloads)
	addStr(m, "on_failure", a.OnFailure)
	r := mapNode()
	addDuration(r, "max_age", a.Retention.MaxAge)
	addSize(r, "max_size", a.Retention.MaxSize)
	add(m, "retention", r)
	return m
}

// refsNode is headers or query: NAME: {from: REF} each.
func refsNode(hs []Header) *yaml.Node {
	m := mapNode()
	for _, h := range hs {
		e := mapNode()
		addStr(e, "from", h.From)
		addKV(m, h.Name, e)
	}
	return flowIfEmpty(m)
}

func serverNode(s *Server) *yaml.Node {
	m := mapNode()
	addStrs(m, "command", s.Command)
	addStr(m, "package", s.Package)
	addStr(m, "image", s.Image.Ref)
	addBool(m, "image_insecure", s.Image.Insecure)
	addStr(m, "image_platform", s.Image.Platform)
	addStrs(m, "args", s.Args)
	addStr(m, "url", s.URL)
	addStr(m, "transport", s.Transport)
	addStr(m, "builtin", s.Builtin)
	if s.Commands.Allow != nil || s.Commands.Deny != nil || s.Commands.Approve != nil || s.Commands.Meta.Pos != (Pos{}) {
		c := mapNode()
		addStrs(c, "allow", s.Commands.Allow)
		addStrs(c, "deny", s.Commands.Deny)
		addStrs(c, "approve", s.Commands.Approve)
		if s.Commands.Meta.Has("job_lifetime") || s.Commands.JobLifetime != 0 {
			addKV(c, "job_lifetime", scalar("!!str", s.Commands.JobLifetime.String()))
		}
		addKV(m, "commands", c)
	}
	addStr(m, "placement", s.Placement)
	addStr(m, "scope", s.Scope)
	if s.Prefix != nil {
		addKV(m, "prefix", scalar("!!str", *s.Prefix))
	}
	if s.Headers != nil {
		addKV(m, "headers", refsNode(s.Headers))
	}
	if s.Query != nil {
		addKV(m, "query", refsNode(s.Query))
	}
	if s.OAuth != nil {
		addKV(m, "oauth", serverOAuthNode(s.OAuth))
	}
	add(m, "filesystem", filesystemNode(&s.Filesystem))
	addEnvVars(m, "env", s.Env)
	if s.Secrets != nil {
		sm := mapNode()
		for i := range s.Secrets {
			addKV(sm, s.Secrets[i].Name, secretNode(&s.Secrets[i]))
		}
		addKV(m, "secrets", flowIfEmpty(sm))
	}
	add(m, "network", networkNode(&s.Network))
	add(m, "exec", execNode(&s.Exec))
	add(m, "limits", limitsNode(&s.Limits))
	add(m, "lifecycle", lifecycleNode(&s.Lifecycle))
	if a := s.Artifacts; a != nil {
		am := mapNode()
		addStr(am, "dir", a.Dir)
		addStrs(am, "include", a.Include)
		addSize(am, "max_size", a.MaxSize)
		addKV(m, "artifacts", flowIfEmpty(am))
	}
	addStr(m, "pin", s.Pin)
	addStr(m, "scan", s.Scan)
	addStr(m, "results_scan", s.ResultsScan)
	addStr(m, "credentials", s.Credentials)
	add(m, "tools", toolsNode(&s.Tools))
	add(m, "sandbox", sandboxNode(&s.Sandbox))
	if s.Backend != nil {
		addKV(m, "backend", flowIfEmpty(backendNode(s.Backend)))
	}
	return flowIfEmpty(m)
}

func filesystemNode(fs *Filesystem) *yaml.Node {
	m := mapNode()
	if in := fs.Input; in != nil {
		n := mapNode()
		addStr(n, "source", in.Source)
		addStr(n, "mode", in.Mode)
		addSize(n, "size", in.Size)
		addKV(m, "input", flowIfEmpty(n))
	}
	if out := fs.Output; out != nil {
		n := mapNode()
		addStr(n, "source", out.Source)
		addSize(n, "size", out.Size)
		addKV(m, "output", flowIfEmpty(n))
	}
	t := mapNode()
	addSize(t, "size", fs.Tmp.Size)
	add(m, "tmp", t)
	if fs.Mounts != nil {
		l := listNode(false)
		for _, mt := range fs.Mounts {
			n := mapNode()
			addStr(n, "source", mt.Source)
			addStr(n, "target", mt.Target)
			addStr(n, "mode", mt.Mode)
			addStr(n, "git", mt.Git)
			l.Content = append(l.Content, flowIfEmpty(n))
		}
		addKV(m, "mounts", flowIfEmpty(l))
	}
	addStr(m, "template", fs.Template)
	return m
}

func secretNode(s *Secret) *yaml.Node {
	m := mapNode()
	addStr(m, "from", s.From)
	addStr(m, "as", s.As)
	addDuration(m, "ttl", s.TTL)
	if s.Inject != nil {
		addKV(m, "inject", injectNode(s.Inject))
	}
	return flowIfEmpty(m)
}

func networkNode(nw *Network) *yaml.Node {
	m := mapNode()
	if nw.Egress != nil {
		l := listNode(false)
		for _, e := range nw.Egress {
			n := mapNode()
			addStr(n, "host", e.Host)
			if e.Ports != nil {
				ports := listNode(true)
				for _, p := range e.Ports {
					ports.Content = append(ports.Content, scalar("!!int", strconv.Itoa(p)))
				}
				addKV(n, "ports", ports)
			}
			addStr(n, "cidr", e.CIDR)
			l.Content = append(l.Content, flowIfEmpty(n))
		}
		addKV(m, "egress", flowIfEmpty(l))
	}
	if nw.Forward != nil {
		l := listNode(false)
		for _, f := range nw.Forward {
			n := mapNode()
			addStr(n, "listen", f.Listen)
			addStr(n, "to", f.To)
			l.Content = append(l.Content, flowIfEmpty(n))
		}
		addKV(m, "forward", flowIfEmpty(l))
	}
	if nl := networkLimitsNode(&nw.Limits); len(nl.Content) > 0 {
		addKV(m, "limits", flowIfEmpty(nl))
	}
	return m
}

func networkLimitsNode(l *NetworkLimits) *yaml.Node {
	m := mapNode()
	addNonZeroInt(m, "connections", l.Connections)
	addSize(m, "bytes_per_connection", l.BytesPerConnection)
	addSize(m, "bytes_total", l.BytesTotal)
	addDuration(m, "idle", l.Idle)
	addDuration(m, "max_duration", l.MaxDuration)
	return m
}

func execNode(e *Exec) *yaml.Node {
	m := mapNode()
	addStrs(m, "allow", e.Allow)
	addBool(m, "writable", e.Writable)
	return m
}

func limitsNode(l *Limits) *yaml.Node {
	m := mapNode()
	addSize(m, "memory", l.Memory)
	addNonZeroInt(m, "pids", l.Pids)
	if l.CPU != 0 {
		cpu := strconv.FormatFloat(l.CPU, 'g', -1, 64)
		if !strings.ContainsAny(cpu, ".e") {
			cpu += ".0" // "1" would print as "!!float 1"
		}
		addKV(m, "cpu", scalar("!!float", cpu))
	}
	addDuration(m, "call_timeout", l.CallTimeout)
	addSize(m, "output", l.Output)
	return m
}

func lifecycleNode(l *Lifecycle) *yaml.Node {
	m := mapNode()
	addDuration(m, "idle", l.Idle)
	addStr(m, "idle_action", l.IdleAction)
	addDuration(m, "idle_stop", l.IdleStop)
	addDuration(m, "max_lifetime", l.MaxLifetime)
	addStr(m, "restart", l.Restart)
	return m
}

// addEnvVars adds key as a mapping of vars in their order, the way the
// decoder's env reads it back; nil adds nothing, empty adds {}.
func addEnvVars(m *yaml.Node, key string, vars []EnvVar) {
	if vars == nil {
		return
	}
	e := mapNode()
	for _, v := range vars {
		addKV(e, v.Name, scalar("!!str", v.Value))
	}
	addKV(m, key, flowIfEmpty(e))
}

func toolsNode(t *Tools) *yaml.Node {
	m := mapNode()
	addStrs(m, "allow", t.Allow)
	addStrs(m, "deny", t.Deny)
	addStrs(m, "approve", t.Approve)
	if t.Rules != nil {
		l := listNode(false)
		for _, r := range t.Rules {
			n := mapNode()
			addStr(n, "tool", r.Tool)
			addStr(n, "when", r.When)
			addStr(n, "action", r.Action)
			l.Content = append(l.Content, flowIfEmpty(n))
		}
		addKV(m, "rules", flowIfEmpty(l))
	}
	addStr(m, "default", t.Default)
	addStrs(m, "approve_annotations", t.ApproveAnnotations)
	rl := mapNode()
	addNonZeroInt(rl, "per_minute", t.RateLimit.PerMinute)
	addNonZeroInt(rl, "per_client_tool", t.RateLimit.PerClientTool)
	addNonZeroInt(rl, "burst", t.RateLimit.Burst)
	add(m, "rate_limit", rl)
	return m
}
