package config

import "go.yaml.in/yaml/v3"

// This file maps each mapping of mcpbox.yaml to its struct. The field lists
// are the schema: a key not listed is an unknown key.

type node = yaml.Node

func (d *decoder) config(n *node) *Config {
	c := &Config{File: d.file}
	d.mapping(n, "", &c.Meta, []field{
		{"version", func(v *node, p string) { c.Version = d.integer(v, p) }},
		{"state_dir", func(v *node, p string) { c.StateDir = d.str(v, p) }},
		{"listen", func(v *node, p string) { d.listen(v, p, &c.Listen) }},
		{"clients", func(v *node, p string) { c.Clients = d.clients(v, p) }},
		{"servers", func(v *node, p string) { c.Servers = d.servers(v, p) }},
		{"sandbox", func(v *node, p string) { d.sandbox(v, p, &c.Sandbox) }},
		{"approvals", func(v *node, p string) { d.approvals(v, p, &c.Approvals) }},
		{"audit", func(v *node, p string) { d.audit(v, p, &c.Audit) }},
		{"oauth", func(v *node, p string) { d.oauth(v, p, &c.OAuth) }},
		{"backend", func(v *node, p string) { d.backend(v, p, &c.Backend) }},
	})
	return c
}

func (d *decoder) listen(n *node, path string, l *Listen) {
	d.mapping(n, path, &l.Meta, []field{
		{"http", func(v *node, p string) { d.http(v, p, &l.HTTP) }},
	})
}

func (d *decoder) http(n *node, path string, h *HTTP) {
	d.mapping(n, path, &h.Meta, []field{
		{"addr", func(v *node, p string) { h.Addr = d.str(v, p) }},
		{"allowed_origins", func(v *node, p string) { h.AllowedOrigins = d.strs(v, p, &h.Meta, "allowed_origins", d.str) }},
		{"oauth", func(v *node, p string) { h.OAuth = d.httpOAuth(v, p) }},
		{"tls", func(v *node, p string) {
			d.mapping(v, p, &h.TLS.Meta, []field{
				{"cert", func(v *node, p string) { h.TLS.Cert = d.str(v, p) }},
				{"key", func(v *node, p string) { h.TLS.Key = d.str(v, p) }},
			})
		}},
	})
}

func (d *decoder) clients(n *node, path string) []Client {
	out := []Client{}
	d.list(n, path, func(_ int, el *node, path string) {
		var c Client
		d.mapping(el, path, &c.Meta, []field{
			{"name", func(v *node, p string) { c.Name = d.str(v, p) }},
			{"token", func(v *node, p string) {
				if d.refMapping(v, p) {
					d.mapping(v, p, &c.Token.Meta, []field{
						{"from", func(v *node, p string) { c.Token.From = d.str(v, p) }},
					})
				}
			}},
			{"role", func(v *node, p string) { c.Role = d.str(v, p) }},
			{"tools", func(v *node, p string) {
				d.mapping(v, p, &c.Tools.Meta, []field{
					{"allow", func(v *node, p string) { c.Tools.Allow = d.strs(v, p, &c.Tools.Meta, "allow", d.str) }},
					{"deny", func(v *node, p string) { c.Tools.Deny = d.strs(v, p, &c.Tools.Meta, "deny", d.str) }},
					{"approve", func(v *node, p string) { c.Tools.Approve = d.strs(v, p, &c.Tools.Meta, "approve", d.str) }},
				})
			}},
		})
		out = append(out, c)
	})
	return out
}

// refMapping reports whether n may be decoded as a mapping holding a secret
// reference. A scalar there is most likely a pasted secret, so the error
// says so and does not repeat the value.
func (d *decoder) refMapping(n *node, path string) bool {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		d.errorf(pos(n), "%s: expected a mapping such as {from: env:VAR}; secret values never go in the config, only references (env:VAR, file:PATH, cmd:COMMAND)", path)
		return false
	}
	return true
}

func (d *decoder) sandbox(n *node, path string, s *Sandbox) {
	d.mapping(n, path, &s.Meta, []field{
		{"require", func(v *node, p string) { s.Require = d.strs(v, p, &s.Meta, "require", d.str) }},
		{"warm_pool", func(v *node, p string) { s.WarmPool = d.integer(v, p) }},
	})
}

func (d *decoder) approvals(n *node, path string, a *Approvals) {
	d.mapping(n, path, &a.Meta, []field{
		{"timeout", func(v *node, p string) { a.Timeout = d.duration(v, p) }},
		{"channels", func(v *node, p string) { a.Channels = d.strs(v, p, &a.Meta, "channels", d.str) }},
	})
}

func (d *decoder) audit(n *node, path string, a *Audit) {
	d.mapping(n, path, &a.Meta, []field{
		{"store", func(v *node, p string) { a.Store = d.str(v, p) }},
		{"jsonl", func(v *node, p string) { a.JSONL = d.str(v, p) }},
		{"include_payloads", func(v *node, p string) { a.IncludePayloads = d.boolean(v, p) }},
		{"on_failure", func(v *node, p string) { a.OnFailure = d.str(v, p) }},
		{"retention", func(v *node, p string) {
			d.mapping(v, p, &a.Retention.Meta, []field{
				{"max_age", func(v *node, p string) { a.Retention.MaxAge = d.duration(v, p) }},
				{"max_size", func(v *node, p string) { a.Retention.MaxSize = d.size(v, p) }},
			})
		}},
	})
}

func (d *decoder) servers(n *node, path string) []*Server {
	out := []*Server{}
	for _, kv := range d.pairs(n, path) {
		s := &Server{Name: kv.name}
		d.server(kv.val, join(path, kv.name), s)
		s.Meta.Pos = pos(kv.key)
		out = append(out, s)
	}
	return out
}

func (d *decoder) server(n *node, path string, s *Server) {
	d.mapping(n, path, &s.Meta, []field{
		{"command", func(v *node, p string) { s.Command = d.strs(v, p, &s.Meta, "command", d.text) }},
		{"package", func(v *node, p string) { s.Package = d.str(v, p) }},
		{"image", func(v *node, p string) { s.Image.Ref = d.str(v, p) }},
		{"image_insecure", func(v *node, p string) { s.Image.Insecure = d.boolean(v, p) }},
		{"image_platform", func(v *node, p string) { s.Image.Platform = d.str(v, p) }},
		{"args", func(v *node, p string) { s.Args = d.strs(v, p, &s.Meta, "args", d.text) }},
		{"url", func(v *node, p string) { s.URL = d.str(v, p) }},
		{"builtin", func(v *node, p string) { s.Builtin = d.str(v, p) }},
		{"commands", func(v *node, p string) {
			d.mapping(v, p, &s.Commands.Meta, []field{
				{"allow", func(v *node, p string) { s.Commands.Allow = d.strs(v, p, &s.Commands.Meta, "allow", d.str) }},
				{"deny", func(v *node, p string) { s.Commands.Deny = d.strs(v, p, &s.Commands.Meta, "deny", d.str) }},
				{"approve", func(v *node, p string) { s.Commands.Approve = d.strs(v, p, &s.Commands.Meta, "approve", d.str) }},
				{"job_lifetime", func(v *node, p string) { s.Commands.JobLifetime = d.duration(v, p) }},
			})
		}},
		{"placement", func(v *node, p string) { s.Placement = d.str(v, p) }},
		{"scope", func(v *node, p string) { s.Scope = d.str(v, p) }},
		{"prefix", func(v *node, p string) { pre := d.str(v, p); s.Prefix = &pre }},
		{"headers", func(v *node, p string) { s.Headers = d.headers(v, p) }},
		{"query", func(v *node, p string) { s.Query = d.headers(v, p) }},
		{"transport", func(v *node, p string) { s.Transport = d.str(v, p) }},
		{"oauth", func(v *node, p string) { s.OAuth = d.serverOAuth(v, p) }},
		{"filesystem", func(v *node, p string) { d.filesystem(v, p, &s.Filesystem) }},
		{"env", func(v *node, p string) { s.Env = d.env(v, p) }},
		{"secrets", func(v *node, p string) { s.Secrets = d.secrets(v, p) }},
		{"network", func(v *node, p string) { d.network(v, p, &s.Network) }},
		{"exec", func(v *node, p string) { d.exec(v, p, &s.Exec) }},
		{"limits", func(v *node, p string) { d.limits(v, p, &s.Limits) }},
		{"lifecycle", func(v *node, p string) { d.lifecycle(v, p, &s.Lifecycle) }},
		{"artifacts", func(v *node, p string) {
			a := &Artifacts{}
			d.mapping(v, p, &a.Meta, []field{
				{"dir", func(v *node, p string) { a.Dir = d.str(v, p) }},
				{"include", func(v *node, p string) { a.Include = d.strs(v, p, &a.Meta, "include", d.str) }},
				{"max_size", func(v *node, p string) { a.MaxSize = d.size(v, p) }},
			})
			s.Artifacts = a
		}},
		{"pin", func(v *node, p string) { s.Pin = d.str(v, p) }},
		{"scan", func(v *node, p string) { s.Scan = d.str(v, p) }},
		{"results_scan", func(v *node, p string) { s.ResultsScan = d.str(v, p) }},
		{"credentials", func(v *node, p string) { s.Credentials = d.str(v, p) }},
		{"tools", func(v *node, p string) { d.tools(v, p, &s.Tools) }},
		{"sandbox", func(v *node, p string) { d.sandbox(v, p, &s.Sandbox) }},
		{"backend", func(v *node, p string) { s.Backend = &Backend{}; d.backend(v, p, s.Backend) }},
	})
}

func (d *decoder) filesystem(n *node, path string, fs *Filesystem) {
	d.mapping(n, path, &fs.Meta, []field{
		{"input", func(v *node, p string) {
			in := &Input{}
			d.mapping(v, p, &in.Meta, []field{
				{"source", func(v *node, p string) { in.Source = d.str(v, p) }},
				{"mode", func(v *node, p string) { in.Mode = d.str(v, p) }},
				{"size", func(v *node, p string) { in.Size = d.size(v, p) }},
			})
			fs.Input = in
		}},
		{"output", func(v *node, p string) {
			out := &Output{}
			d.mapping(v, p, &out.Meta, []field{
				{"source", func(v *node, p string) { out.Source = d.str(v, p) }},
				{"size", func(v *node, p string) { out.Size = d.size(v, p) }},
			})
			fs.Output = out
		}},
		{"tmp", func(v *node, p string) {
			d.mapping(v, p, &fs.Tmp.Meta, []field{
				{"size", func(v *node, p string) { fs.Tmp.Size = d.size(v, p) }},
			})
		}},
		{"mounts", func(v *node, p string) { fs.Mounts = d.mounts(v, p) }},
		{"template", func(v *node, p string) { fs.Template = d.str(v, p) }},
	})
}

func (d *decoder) mounts(n *node, path string) []Mount {
	out := []Mount{}
	d.list(n, path, func(_ int, el *node, path string) {
		var m Mount
		d.mapping(el, path, &m.Meta, []field{
			{"source", func(v *node, p string) { m.Source = d.str(v, p) }},
			{"target", func(v *node, p string) { m.Target = d.str(v, p) }},
			{"mode", func(v *node, p string) { m.Mode = d.str(v, p) }},
			{"git", func(v *node, p string) { m.Git = d.str(v, p) }},
		})
		out = append(out, m)
	})
	return out
}

func (d *decoder) env(n *node, path string) []EnvVar {
	out := []EnvVar{}
	for _, kv := range d.pairs(n, path) {
		value := d.text(kv.val, join(path, kv.name))
		out = append(out, EnvVar{Name: kv.name, Value: value, Pos: pos(kv.key)})
	}
	return out
}

func (d *decoder) headers(n *node, path string) []Header {
	out := []Header{}
	for _, kv := range d.pairs(n, path) {
		h := Header{Name: kv.name}
		p := join(path, kv.name)
		if d.refMapping(kv.val, p) {
			d.mapping(kv.val, p, &h.Meta, []field{
				{"from", func(v *node, p string) { h.From = d.str(v, p) }},
			})
		}
		h.Meta.Pos = pos(kv.key)
		out = append(out, h)
	}
	return out
}

func (d *decoder) secrets(n *node, path string) []Secret {
	out := []Secret{}
	for _, kv := range d.pairs(n, path) {
		s := Secret{Name: kv.name}
		p := join(path, kv.name)
		if d.refMapping(kv.val, p) {
			d.mapping(kv.val, p, &s.Meta, []field{
				{"from", func(v *node, p string) { s.From = d.str(v, p) }},
				{"as", func(v *node, p string) { s.As = d.str(v, p) }},
				{"ttl", func(v *node, p string) { s.TTL = d.duration(v, p) }},
				{"inject", func(v *node, p string) { s.Inject = d.inject(v, p) }},
			})
		}
		s.Meta.Pos = pos(kv.key)
		out = append(out, s)
	}
	return out
}

func (d *decoder) network(n *node, path string, nw *Network) {
	d.mapping(n, path, &nw.Meta, []field{
		{"egress", func(v *node, p string) { nw.Egress = d.egress(v, p) }},
		{"forward", func(v *node, p string) { nw.Forward = d.forward(v, p) }},
		{"limits", func(v *node, p string) { d.networkLimits(v, p, &nw.Limits) }},
	})
}

func (d *decoder) networkLimits(n *node, path string, l *NetworkLimits) {
	d.mapping(n, path, &l.Meta, []field{
		{"connections", func(v *node, p string) { l.Connections = d.integer(v, p) }},
		{"bytes_per_connection", func(v *node, p string) { l.BytesPerConnection = d.size(v, p) }},
		{"bytes_total", func(v *node, p string) { l.BytesTotal = d.size(v, p) }},
		{"idle", func(v *node, p string) { l.Idle = d.duration(v, p) }},
		{"max_duration", func(v *node, p string) { l.MaxDuration = d.duration(v, p) }},
	})
}

func (d *decoder) egress(n *node, path string) []Egress {
	out := []Egress{}
	d.list(n, path, func(_ int, el *node, path string) {
		var e Egress
		d.mapping(el, path, &e.Meta, []field{
			{"host", func(v *node, p string) { e.Host = d.str(v, p) }},
			{"ports", func(v *node, p string) {
				e.Ports = []int{}
				d.list(v, p, func(i int, el *node, p string) {
					e.Meta.set(elemKey("ports", i), pos(el))
					e.Ports = append(e.Ports, d.integer(el, p))
				})
			}},
			{"cidr", func(v *node, p string) { e.CIDR = d.str(v, p) }},
		})
		out = append(out, e)
	})
	return out
}

func (d *decoder) forward(n *node, path string) []Forward {
	out := []Forward{}
	d.list(n, path, func(_ int, el *node, path string) {
		var f Forward
		d.mapping(el, path, &f.Meta, []field{
			{"listen", func(v *node, p string) { f.Listen = d.str(v, p) }},
			{"to", func(v *node, p string) { f.To = d.str(v, p) }},
		})
		out = append(out, f)
	})
	return out
}

func (d *decoder) exec(n *node, path string, e *Exec) {
	d.mapping(n, path, &e.Meta, []field{
		{"allow", func(v *node, p string) { e.Allow = d.strs(v, p, &e.Meta, "allow", d.str) }},
		{"writable", func(v *node, p string) { e.Writable = d.boolean(v, p) }},
	})
}

func (d *decoder) limits(n *node, path string, l *Limits) {
	d.mapping(n, path, &l.Meta, []field{
		{"memory", func(v *node, p string) { l.Memory = d.size(v, p) }},
		{"pids", func(v *node, p string) { l.Pids = d.integer(v, p) }},
		{"cpu", func(v *node, p string) { l.CPU = d.float(v, p) }},
		{"call_timeout", func(v *node, p string) { l.CallTimeout = d.duration(v, p) }},
		{"output", func(v *node, p string) { l.Output = d.size(v, p) }},
	})
}

func (d *decoder) lifecycle(n *node, path string, l *Lifecycle) {
	d.mapping(n, path, &l.Meta, []field{
		{"idle", func(v *node, p string) { l.Idle = d.duration(v, p) }},
		{"idle_action", func(v *node, p string) { l.IdleAction = d.str(v, p) }},
		{"idle_stop", func(v *node, p string) { l.IdleStop = d.duration(v, p) }},
		{"max_lifetime", func(v *node, p string) { l.MaxLifetime = d.duration(v, p) }},
		{"restart", func(v *node, p string) { l.Restart = d.str(v, p) }},
	})
}

func (d *decoder) tools(n *node, path string, t *Tools) {
	d.mapping(n, path, &t.Meta, []field{
		{"allow", func(v *node, p string) { t.Allow = d.strs(v, p, &t.Meta, "allow", d.str) }},
		{"deny", func(v *node, p string) { t.Deny = d.strs(v, p, &t.Meta, "deny", d.str) }},
		{"approve", func(v *node, p string) { t.Approve = d.strs(v, p, &t.Meta, "approve", d.str) }},
		{"rules", func(v *node, p string) { t.Rules = d.rules(v, p) }},
		{"default", func(v *node, p string) { t.Default = d.str(v, p) }},
		{"approve_annotations", func(v *node, p string) {
			t.ApproveAnnotations = d.strs(v, p, &t.Meta, "approve_annotations", d.str)
		}},
		{"rate_limit", func(v *node, p string) {
			d.mapping(v, p, &t.RateLimit.Meta, []field{
				{"per_minute", func(v *node, p string) { t.RateLimit.PerMinute = d.integer(v, p) }},
				{"per_client_tool", func(v *node, p string) { t.RateLimit.PerClientTool = d.integer(v, p) }},
				{"burst", func(v *node, p string) { t.RateLimit.Burst = d.integer(v, p) }},
			})
		}},
	})
}

func (d *decoder) rules(n *node, path string) []Rule {
	out := []Rule{}
	d.list(n, path, func(_ int, el *node, path string) {
		var r Rule
		d.mapping(el, path, &r.Meta, []field{
			{"tool", func(v *node, p string) { r.Tool = d.str(v, p) }},
			{"when", func(v *node, p string) { r.When = d.str(v, p) }},
			{"action", func(v *node, p string) { r.Action = d.str(v, p) }},
		})
		out = append(out, r)
	})
	return out
}

// inject is a secret's inject mapping (inject.go).
func (d *decoder) inject(n *node, path string) *Inject {
	in := &Inject{}
	d.mapping(n, path, &in.Meta, []field{
		{"hosts", func(v *node, p string) { in.Hosts = d.strs(v, p, &in.Meta, "hosts", d.str) }},
		{"header", func(v *node, p string) { in.Header = d.str(v, p) }},
		{"format", func(v *node, p string) { in.Format = d.str(v, p) }},
		{"query", func(v *node, p string) { in.Query = d.str(v, p) }},
		{"basic", func(v *node, p string) { in.Basic = d.boolean(v, p) }},
		{"any_header", func(v *node, p string) { in.AnyHeader = d.boolean(v, p) }},
		{"body", func(v *node, p string) { in.Body = d.boolean(v, p) }},
		{"shape", func(v *node, p string) { in.Shape = d.str(v, p) }},
		{"aws", func(v *node, p string) {
			a := &InjectAWS{}
			d.mapping(v, p, &a.Meta, []field{
				{"access_key_id", func(v *node, p string) { a.AccessKeyID = d.str(v, p) }},
				{"secret_access_key", func(v *node, p string) { a.SecretAccessKey = d.str(v, p) }},
				{"session_token", func(v *node, p string) { a.SessionToken = d.str(v, p) }},
				{"pass_through", func(v *node, p string) { a.PassThrough = d.boolean(v, p) }},
			})
			in.AWS = a
		}},
	})
	return in
}
