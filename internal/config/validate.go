package config

import (
	"fmt"
	"strings"
)

// check is one semantic rule over a whole config. Each reports every
// problem it finds rather than stopping at the first.
type check func(r *collector, c *Config)

// checks run in this order; Validate then sorts the errors by position.
var checks = []check{
	checkVersion,
	checkStateDir,
	checkListen,
	checkClients,
	checkServerList,
	checkServers,
	checkPrefixes,
	checkGroups,
	checkDefaultSandbox,
	checkApprovals,
	checkAudit,
	checkOAuth,
	checkBackends,
}

// Validate checks the meaning of a parsed (or built) config: allowed
// values, ranges, paths, hosts, references and combinations. It returns an
// Errors sorted by position, or nil.
func Validate(c *Config) error {
	r := &collector{file: c.File}
	for _, check := range checks {
		check(r, c)
	}
	return r.err()
}

func checkVersion(r *collector, c *Config) {
	switch {
	case !c.Meta.Has("version") && c.Version == 0:
		r.errorf(c.Meta.Pos, "missing version (want version: 1)")
	case c.Version != 1:
		r.errorf(c.Meta.At("version"), "version: unsupported version %d (want 1)", c.Version)
	}
}

func checkStateDir(r *collector, c *Config) {
	if c.Meta.Has("state_dir") || c.StateDir != "" {
		hostPath(r, c.Meta.At("state_dir"), "state_dir", c.StateDir)
	}
}

func checkListen(r *collector, c *Config) {
	h := &c.Listen.HTTP
	if h.Addr != "" || h.Meta.Has("addr") {
		checkListenAddr(r, h.Meta.At("addr"), "listen.http.addr", h.Addr, len(c.Clients) > 0 || h.OAuth != nil)
	}
	for i, o := range h.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			r.errorf(h.Meta.Elem("allowed_origins", i), "listen.http.allowed_origins[%d]: %v", i, err)
		}
	}
	t := &h.TLS
	switch {
	case t.Cert != "" && t.Key == "":
		r.errorf(t.Meta.At("cert"), "listen.http.tls: cert needs a key")
	case t.Key != "" && t.Cert == "":
		r.errorf(t.Meta.At("key"), "listen.http.tls: key needs a cert")
	}
}

func checkListenAddr(r *collector, p Pos, path, addr string, haveClients bool) {
	host, port, err := SplitHostPort(addr)
	if err != nil {
		r.errorf(p, "%s: %v", path, err)
		return
	}
	if _, ok := parsePort(port, 0); !ok {
		r.errorf(p, "%s: invalid port %q (want 0-65535)", path, port)
		return
	}
	if host != "" && !validHostname(host) && !isIP(host) {
		r.errorf(p, "%s: invalid host %q", path, host)
		return
	}
	if !IsLoopbackHost(host) && !haveClients {
		r.errorf(p, "%s: %q is not a loopback address; listening beyond loopback needs clients with tokens", path, addr)
	}
}

func checkClients(r *collector, c *Config) {
	seen := make(map[string]bool)
	for i := range c.Clients {
		cl := &c.Clients[i]
		path := fmt.Sprintf("clients[%d]", i)
		switch {
		case !nameRE().MatchString(cl.Name):
			r.errorf(cl.Meta.At("name"), "%s.name: invalid client name %q (want %s)", path, cl.Name, nameRE())
		case seen[cl.Name]:
			r.errorf(cl.Meta.At("name"), "%s.name: duplicate client name %q", path, cl.Name)
		}
		seen[cl.Name] = true
		if cl.Token.From == "" {
			r.errorf(firstPos(cl.Token.Meta.At("from"), cl.Meta.Pos), "%s.token.from: missing token reference (env:VAR, file:PATH or cmd:COMMAND)", path)
		} else if _, err := ParseSecretRef(cl.Token.From); err != nil {
			r.errorf(cl.Token.Meta.At("from"), "%s.token.from: %v", path, err)
		}
		if cl.Role != "" && cl.Role != RoleAdmin && cl.Role != RoleViewer {
			r.errorf(cl.Meta.At("role"), "%s.role: %q is no dashboard role (want admin or viewer)", path, cl.Role)
		}
		t := &cl.Tools
		for _, l := range []struct {
			key   string
			globs []string
		}{{"allow", t.Allow}, {"deny", t.Deny}, {"approve", t.Approve}} {
			for j, g := range l.globs {
				if err := checkGlob(g); err != nil {
					r.errorf(t.Meta.Elem(l.key, j), "%s.tools.%s[%d]: %v", path, l.key, j, err)
				}
			}
		}
	}
}

func checkServerList(r *collector, c *Config) {
	if len(c.Servers) == 0 {
		r.errorf(c.Meta.At("servers"), "servers: no servers configured")
	}
	seen := make(map[string]bool)
	for i, s := range c.Servers {
		if s == nil {
			r.errorf(c.Meta.At("servers"), "servers[%d]: nil server", i)
			continue
		}
		if seen[s.Name] {
			r.errorf(s.Meta.Pos, "servers: duplicate server name %q", s.Name)
		}
		seen[s.Name] = true
	}
}

// checkGroups: the servers of a group share one sandbox, which the
// group's first server (in file order) describes; the others may not set
// sandbox settings of their own, and all share one scope.
func checkGroups(r *collector, c *Config) {
	first := map[string]*Server{}
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		g, ok := strings.CutPrefix(s.Placement, PlacementGroup)
		if !ok {
			continue
		}
		p := "servers." + s.Name
		if s.Builtin != "" {
			r.errorf(s.Meta.At("placement"), "%s.placement: a built-in server runs in a sandbox of its own, not in a group", p)
		}
		for _, sec := range s.Secrets {
			if sec.TTL != 0 {
				r.errorf(sec.Meta.At("ttl"), "%s.secrets.%s.ttl: a group's sandbox is shared, so one member's secret cannot renew it; use placement: isolated", p, sec.Name)
			}
		}
		f := first[g]
		if f == nil {
			first[g] = s
			continue
		}
		for _, key := range []string{"filesystem", "network", "exec", "sandbox"} {
			if s.Meta.Has(key) {
				r.errorf(s.Meta.At(key), "%s.%s: the servers of group %s share one sandbox, set by its first server %s; set %s there", p, key, g, f.Name, key)
			}
		}
		for _, key := range []string{"memory", "pids", "cpu"} {
			if s.Limits.Meta.Has(key) {
				r.errorf(s.Limits.Meta.At(key), "%s.limits.%s: the servers of group %s share one sandbox, set by its first server %s; set limits.%s there", p, key, g, f.Name, key)
			}
		}
		if scopeOf(s) != scopeOf(f) {
			r.errorf(firstPos(s.Meta.At("scope"), s.Meta.Pos), "%s.scope: %q differs from %q of %s; the servers of group %s share their sandboxes", p, scopeOf(s), scopeOf(f), f.Name, g)
		}
	}
}

func scopeOf(s *Server) string {
	if s.Scope == "" {
		return ScopeAgent
	}
	return s.Scope
}

// checkPrefixes refuses prefixes that could make two servers' names
// collide: one server's prefix may not begin another's.
func checkPrefixes(r *collector, c *Config) {
	for i, s := range c.Servers {
		if s == nil {
			continue
		}
		for _, o := range c.Servers[:i] {
			if o == nil || o.Name == s.Name {
				continue // a duplicate name is reported by itself
			}
			a, b := c.EffectivePrefix(o), c.EffectivePrefix(s)
			if strings.HasPrefix(a, b) || strings.HasPrefix(b, a) {
				r.errorf(firstPos(s.Meta.At("prefix"), s.Meta.Pos), "servers.%s.prefix: %q overlaps %q of server %s, so tool names could collide; set distinct prefixes", s.Name, b, a, o.Name)
			}
		}
	}
}

func checkServers(r *collector, c *Config) {
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		path := "servers." + s.Name
		for _, check := range serverChecks {
			check(r, s, path)
		}
	}
}

func checkDefaultSandbox(r *collector, c *Config) {
	checkLayers(r, &c.Sandbox, "sandbox")
}

func checkLayers(r *collector, s *Sandbox, path string) {
	if s.WarmPool < 0 || s.WarmPool > MaxWarmPool {
		r.errorf(s.Meta.At("warm_pool"), "%s.warm_pool: %d is out of range (0 to %d)", path, s.WarmPool, MaxWarmPool)
	}
	seen := make(map[string]bool)
	for i, l := range s.Require {
		p := s.Meta.Elem("require", i)
		switch {
		case !contains(AllLayers(), l):
			r.errorf(p, "%s.require[%d]: unknown layer %q (want %s)", path, i, l, strings.Join(AllLayers(), ", "))
		case seen[l]:
			r.errorf(p, "%s.require[%d]: duplicate layer %q", path, i, l)
		}
		seen[l] = true
	}
}

func checkApprovals(r *collector, c *Config) {
	a := &c.Approvals
	positive(r, &a.Meta, "approvals", "timeout", int64(a.Timeout))
	seen := make(map[string]bool)
	for i, ch := range a.Channels {
		p := a.Meta.Elem("channels", i)
		path := fmt.Sprintf("approvals.channels[%d]", i)
		switch {
		case !contains([]string{ChannelElicitation, ChannelCLI, ChannelWeb}, ch):
			r.errorf(p, "%s: unknown channel %q (want elicitation, cli or web)", path, ch)
		case seen[ch]:
			r.errorf(p, "%s: duplicate channel %q", path, ch)
		}
		seen[ch] = true
	}
}

func checkAudit(r *collector, c *Config) {
	a := &c.Audit
	if a.Store != "" && a.Store != AuditStoreSQLite {
		r.errorf(a.Meta.At("store"), "audit.store: unknown store %q (want sqlite)", a.Store)
	}
	if a.Meta.Has("on_failure") && a.OnFailure != AuditRefuse && a.OnFailure != AuditAllow {
		r.errorf(a.Meta.At("on_failure"), "audit.on_failure: unknown value %q (want refuse or allow)", a.OnFailure)
	}
	if a.Meta.Has("jsonl") || a.JSONL != "" {
		hostPath(r, a.Meta.At("jsonl"), "audit.jsonl", a.JSONL)
		// Records hold names a client chooses: appended to a file some
		// program runs or reads as its own (~/.bashrc, a cron table, a
		// .gitconfig) they would be its code.
		if a.JSONL != "" && !strings.HasSuffix(a.JSONL, ".jsonl") {
			r.errorf(a.Meta.At("jsonl"), "audit.jsonl: %q: the name must end in .jsonl (the records hold names a client chooses: no other program may run or read them as its own)", a.JSONL)
		}
	}
	positive(r, &a.Retention.Meta, "audit.retention", "max_age", int64(a.Retention.MaxAge))
	positive(r, &a.Retention.Meta, "audit.retention", "max_size", int64(a.Retention.MaxSize))
}

// firstPos returns the first known position, for values whose own mapping
// may be absent.
func firstPos(ps ...Pos) Pos {
	for _, p := range ps {
		if p.Line > 0 {
			return p
		}
	}
	return Pos{}
}

// positive reports key of m as an error if it was written with a value <= 0;
// such values are otherwise read as "not set", which is not what was meant.
func positive(r *collector, m *Meta, path, key string, v int64) {
	if m.Has(key) && v <= 0 {
		r.errorf(m.At(key), "%s.%s: must be positive (leave it out for the default)", path, key)
	}
}

// enum reports v if it is neither empty nor one of allowed.
func enum(r *collector, m *Meta, path, key, v string, allowed ...string) {
	if (v != "" || m.Has(key)) && !contains(allowed, v) {
		r.errorf(m.At(key), "%s.%s: invalid value %q (want %s)", path, key, v, orList(allowed))
	}
}

func orList(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// hostPath checks a host path as written; resolving it is the caller's job.
func hostPath(r *collector, p Pos, path, v string) {
	switch {
	case v == "":
		r.errorf(p, "%s: must not be empty", path)
	case strings.ContainsRune(v, 0):
		r.errorf(p, "%s: must not contain NUL", path)
	}
}
