package config

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
)

// serverCheck is one semantic rule over one server; path is "servers.NAME".
type serverCheck func(r *collector, s *Server, path string)

var serverChecks = []serverCheck{
	checkServerName,
	checkRunTarget,
	checkPackage,
	checkImage,
	checkRemoteSections,
	checkScope,
	checkCredentials,
	checkPrefix,
	checkHeaders,
	checkServerOAuth,
	checkInputOutput,
	checkMounts,
	checkEnv,
	checkSecrets,
	checkEgress,
	checkForward,
	checkNetworkLimits,
	checkExec,
	checkLimits,
	checkLifecycle,
	checkPin,
	checkArtifacts,
	checkToolGlobs,
	checkRules,
	checkServerSandbox,
}

func checkServerName(r *collector, s *Server, p string) {
	if !nameRE().MatchString(s.Name) {
		r.errorf(s.Meta.Pos, "servers: invalid server name %q (want %s)", s.Name, nameRE())
	}
}

// checkRunTarget checks command, url and placement together: a server is
// either local (command, in a sandbox) or remote (url, outside any sandbox).
func checkRunTarget(r *collector, s *Server, p string) {
	builtin := s.Builtin != "" || s.Meta.Has("builtin")
	local, remote := s.Command != nil || builtin || isImage(s) || isPackage(s), s.URL != "" || s.Meta.Has("url")
	switch {
	case isPackage(s) && (s.Command != nil || builtin || isImage(s)):
		r.errorf(s.Meta.At("package"), "%s: package is exclusive with command, image and builtin", p)
	case isImage(s) && (s.Command != nil || builtin || remote):
		// checkImage names the conflict.
	case builtin && s.Command != nil:
		r.errorf(s.Meta.At("builtin"), "%s: builtin and command are exclusive", p)
	case builtin && remote:
		r.errorf(s.Meta.At("builtin"), "%s: builtin and url are exclusive", p)
	case local && remote:
		r.errorf(s.Meta.At("url"), "%s: command and url are exclusive (local server or remote server)", p)
	case !local && !remote:
		r.errorf(s.Meta.Pos, "%s: needs a command (local server), a url (remote server) or builtin", p)
	}
	if s.Command != nil {
		checkCommand(r, s, p)
	}
	if builtin && s.Builtin != BuiltinWorkspace {
		r.errorf(s.Meta.At("builtin"), "%s.builtin: unknown built-in server %q (want %s)", p, s.Builtin, BuiltinWorkspace)
	}
	positive(r, &s.Commands.Meta, p+".commands", "job_lifetime", int64(s.Commands.JobLifetime))
	if !builtin && s.Meta.Has("commands") {
		r.errorf(s.Meta.At("commands"), "%s.commands: only the built-in workspace server takes commands", p)
	}
	cm := &s.Commands.Meta
	for _, l := range []struct {
		key   string
		globs []string
	}{{"allow", s.Commands.Allow}, {"deny", s.Commands.Deny}, {"approve", s.Commands.Approve}} {
		for i, g := range l.globs {
			if g == "" {
				r.errorf(cm.Elem(l.key, i), "%s.commands.%s[%d]: empty glob", p, l.key, i)
			} else if _, err := path.Match(g, ""); err != nil {
				r.errorf(cm.Elem(l.key, i), "%s.commands.%s[%d]: bad glob %q: %v", p, l.key, i, g, err)
			}
		}
	}
	if remote {
		if err := checkURL(s.URL); err != nil {
			r.errorf(s.Meta.At("url"), "%s.url: %v", p, err)
		}
	}
	pl, at := s.Placement, s.Meta.At("placement")
	switch {
	case pl == "" && !s.Meta.Has("placement"):
	case pl == PlacementRemote:
		if local {
			r.errorf(at, "%s.placement: a remote server has a url, not a command", p)
		}
	case pl == PlacementIsolated || strings.HasPrefix(pl, PlacementGroup):
		if g, ok := strings.CutPrefix(pl, PlacementGroup); ok && !nameRE().MatchString(g) {
			r.errorf(at, "%s.placement: invalid group name %q (want %s)", p, g, nameRE())
		}
		if remote && !local {
			r.errorf(at, "%s.placement: a server with a url runs outside any sandbox; use placement: remote", p)
		}
	default:
		r.errorf(at, "%s.placement: invalid value %q (want isolated, group:NAME or remote)", p, pl)
	}
}

func checkCommand(r *collector, s *Server, p string) {
	if len(s.Command) == 0 {
		r.errorf(s.Meta.At("command"), "%s.command: must not be empty", p)
		return
	}
	if s.Command[0] == "" {
		r.errorf(s.Meta.Elem("command", 0), "%s.command[0]: program must not be empty", p)
	}
	for i, arg := range s.Command {
		if strings.ContainsRune(arg, 0) {
			r.errorf(s.Meta.Elem("command", i), "%s.command[%d]: must not contain NUL", p, i)
		}
	}
}

// checkRemoteSections rejects sandbox settings on a remote server, where
// they would be silently ignored.
func checkRemoteSections(r *collector, s *Server, p string) {
	if s.Command != nil || (s.URL == "" && !s.Meta.Has("url")) {
		return
	}
	for _, key := range []string{"filesystem", "env", "secrets", "network", "exec", "lifecycle", "sandbox"} {
		if s.Meta.Has(key) {
			r.errorf(s.Meta.At(key), "%s.%s: does not apply to a remote server (it runs outside any sandbox)", p, key)
		}
	}
	for _, key := range []string{"memory", "pids", "cpu"} {
		if s.Limits.Meta.Has(key) {
			r.errorf(s.Limits.Meta.At(key), "%s.limits.%s: does not apply to a remote server (it runs outside any sandbox)", p, key)
		}
	}
}

var prefixRE = lazyRegexp(`^[A-Za-z0-9_.-]{0,64}$`)

func checkPrefix(r *collector, s *Server, p string) {
	if s.Prefix != nil && !prefixRE().MatchString(*s.Prefix) {
		r.errorf(s.Meta.At("prefix"), "%s.prefix: invalid prefix %q (want up to 64 of A-Z a-z 0-9 _ . -, the characters of tool names)", p, *s.Prefix)
	}
}

var headerRE = lazyRegexp("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")

// Transports of a remote server (servers.NAME.transport).
const (
	TransportStreamable = "streamable" // Streamable HTTP (2025-03-26 and later)
	TransportSSE        = "sse"        // HTTP+SSE (2024-11-05)
	TransportAuto       = "auto"       // the spec's backwards-compatibility probe at each connect
)

func checkHeaders(r *collector, s *Server, p string) {
	if s.Headers != nil && s.URL == "" && !s.Meta.Has("url") {
		r.errorf(s.Meta.At("headers"), "%s.headers: only a remote server (url) takes headers; a local server gets secrets", p)
	}
	if s.Meta.Has("transport") && s.URL == "" && !s.Meta.Has("url") {
		r.errorf(s.Meta.At("transport"), "%s.transport: only a remote server (url) has a transport", p)
	}
	enum(r, &s.Meta, p, "transport", s.Transport, TransportStreamable, TransportSSE, TransportAuto)
	for _, h := range s.Headers {
		hp := p + ".headers." + h.Name
		if !headerRE().MatchString(h.Name) {
			r.errorf(h.Meta.Pos, "%s: invalid HTTP header name", hp)
		}
		checkHeaderRef(r, h, hp)
	}
	if s.Query != nil && s.URL == "" && !s.Meta.Has("url") {
		r.errorf(s.Meta.At("query"), "%s.query: only a remote server (url) takes query parameters; a local server gets secrets", p)
	}
	var inURL url.Values
	if u, err := url.Parse(s.URL); err == nil {
		inURL = u.Query()
	}
	for _, q := range s.Query {
		qp := p + ".query." + q.Name
		switch {
		case !queryNameRE().MatchString(q.Name):
			r.errorf(q.Meta.Pos, "%s: invalid query parameter name (want up to 128 of A-Z a-z 0-9 _ . - ~ [ ])", qp)
		case inURL.Has(q.Name):
			r.errorf(q.Meta.Pos, "%s: the url has this parameter too; keep it in one place (here, if it is a credential)", qp)
		}
		checkHeaderRef(r, q, qp)
	}
}

// queryNameRE: the query parameter names query takes, which need no
// escaping (unreserved characters, and brackets for name[] forms).
var queryNameRE = lazyRegexp(`^[A-Za-z0-9_.~\[\]-]{1,128}$`)

// checkHeaderRef checks the secret reference of a header or query
// parameter at path hp.
func checkHeaderRef(r *collector, h Header, hp string) {
	if h.From == "" {
		r.errorf(h.Meta.Pos, "%s.from: missing reference (env:VAR, file:PATH or cmd:COMMAND)", hp)
	} else if _, err := ParseSecretRef(h.From); err != nil {
		r.errorf(h.Meta.At("from"), "%s.from: %v", hp, err)
	}
}

func checkScope(r *collector, s *Server, p string) {
	enum(r, &s.Meta, p, "scope", s.Scope, ScopeAgent, ScopeSession, ScopeShared)
}

func checkCredentials(r *collector, s *Server, p string) {
	enum(r, &s.Meta, p, "credentials", s.Credentials, CredentialsFlag, CredentialsRedact, CredentialsBlock)
}

func checkInputOutput(r *collector, s *Server, p string) {
	fs := &s.Filesystem
	p += ".filesystem"
	if in := fs.Input; in != nil {
		hostPath(r, in.Meta.At("source"), p+".input.source", in.Source)
		enum(r, &in.Meta, p+".input", "mode", in.Mode, ModeRO, ModeOverlay)
		positive(r, &in.Meta, p+".input", "size", int64(in.Size))
		if in.Meta.Has("size") && in.Mode != ModeOverlay {
			r.errorf(in.Meta.At("size"), "%s.input.size: bounds the changes of mode %s; a read-only input takes none", p, ModeOverlay)
		}
	}
	if out := fs.Output; out != nil {
		if out.Source != "" || out.Meta.Has("source") {
			hostPath(r, out.Meta.At("source"), p+".output.source", out.Source)
		}
		positive(r, &out.Meta, p+".output", "size", int64(out.Size))
	}
	positive(r, &fs.Tmp.Meta, p+".tmp", "size", int64(fs.Tmp.Size))
	if fs.Template != "" || fs.Meta.Has("template") {
		hostPath(r, fs.Meta.At("template"), p+".template", fs.Template)
	}
}

// reservedTargets are where the sandbox itself mounts things; a mount may be
// neither at, below nor above one of them. kernelTargets hold kernel
// filesystems; a mount may not be at or below them.
var (
	reservedTargets = []string{
		"/workspace/input", "/workspace/output", "/tmp", "/run/secrets", "/run/mcpbox",
		"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	}
	kernelTargets = []string{"/proc", "/dev", "/sys"}
)

func checkMounts(r *collector, s *Server, p string) {
	seen := make(map[string]bool)
	for i := range s.Filesystem.Mounts {
		m := &s.Filesystem.Mounts[i]
		mp := fmt.Sprintf("%s.filesystem.mounts[%d]", p, i)
		hostPath(r, m.Meta.At("source"), mp+".source", m.Source)
		if err := CheckMountTarget(m.Target); err != nil {
			r.errorf(m.Meta.At("target"), "%s.target: %v", mp, err)
		} else if seen[m.Target] {
			r.errorf(m.Meta.At("target"), "%s.target: %s is already mounted", mp, m.Target)
		} else {
			// A sandbox refuses a bind inside another at every start
			// (its mount point would be made in the host's dir).
			for j, o := range s.Filesystem.Mounts[:i] {
				if strings.HasPrefix(m.Target, o.Target+"/") || strings.HasPrefix(o.Target, m.Target+"/") {
					r.errorf(m.Meta.At("target"), "%s.target: %s and mounts[%d]'s %s lie one inside the other; nested mounts are not supported: mount them side by side", mp, m.Target, j, o.Target)
					break
				}
			}
		}
		seen[m.Target] = true
		enum(r, &m.Meta, mp, "mode", m.Mode, ModeRO, ModeRW)
		enum(r, &m.Meta, mp, "git", m.Git, ModeRO, ModeRW)
		if m.Git == ModeRW && m.Mode != ModeRW {
			r.errorf(m.Meta.At("git"), "%s.git: rw needs mode: rw (a read-only mount's .git is read-only too)", mp)
		}
	}
}

// CheckMountTarget reports why t cannot be a mount target in a sandbox:
// not absolute and clean, under a kernel filesystem, or overlapping a path
// the sandbox provides itself. The CLI checks --mount with it too.
func CheckMountTarget(t string) error {
	if err := sandboxPath(t); err != nil {
		return err
	}
	if t == "/" {
		return fmt.Errorf("must not be /")
	}
	for _, k := range kernelTargets {
		if within(t, k) {
			return fmt.Errorf("%s is under %s, a kernel filesystem", t, k)
		}
	}
	for _, res := range reservedTargets {
		if within(t, res) || within(res, t) {
			return fmt.Errorf("%s overlaps %s, which the sandbox provides", t, res)
		}
	}
	return nil
}

// within reports whether clean absolute path a is b or below b (/ holds
// every path).
func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/")
}

// sandboxPath checks a path inside the sandbox: absolute and clean, since
// "/data/../etc" would otherwise slip past the reserved-path checks.
func sandboxPath(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("must not be empty")
	case strings.ContainsRune(t, 0):
		return fmt.Errorf("must not contain NUL")
	case !path.IsAbs(t):
		return fmt.Errorf("%q is not an absolute path", t)
	case path.Clean(t) != t:
		return fmt.Errorf("%q is not clean (want %q)", t, path.Clean(t))
	}
	return nil
}

func checkEnv(r *collector, s *Server, p string) {
	seen := make(map[string]bool)
	for _, e := range s.Env {
		switch {
		case e.Name == "" || strings.ContainsAny(e.Name, "=\x00"):
			r.errorf(e.Pos, "%s.env: invalid variable name %q (must be non-empty, without = or NUL)", p, e.Name)
		case seen[e.Name]:
			r.errorf(e.Pos, "%s.env: duplicate variable %q", p, e.Name)
		case strings.ContainsRune(e.Value, 0):
			r.errorf(e.Pos, "%s.env.%s: value must not contain NUL", p, e.Name)
		}
		seen[e.Name] = true
	}
}

func checkSecrets(r *collector, s *Server, p string) {
	env := make(map[string]bool)
	for _, e := range s.Env {
		env[e.Name] = true
	}
	seen := make(map[string]bool)
	for i := range s.Secrets {
		sec := &s.Secrets[i]
		sp := p + ".secrets." + sec.Name
		switch {
		case !secretNameRE().MatchString(sec.Name):
			r.errorf(sec.Meta.Pos, "%s.secrets: invalid secret name %q (want %s)", p, sec.Name, secretNameRE())
		case seen[sec.Name]:
			r.errorf(sec.Meta.Pos, "%s.secrets: duplicate secret %q", p, sec.Name)
		case env[sec.Name] && sec.As != SecretAsFile:
			r.errorf(sec.Meta.Pos, "%s.secrets: %s is also set in env", p, sec.Name)
		}
		seen[sec.Name] = true
		if sec.Inject != nil {
			checkInject(r, s, sec, sp)
		}
		if sec.IsAWS() {
			// no from: each of inject.aws's fields is a reference (checkInjectAWS)
		} else if sec.From == "" {
			r.errorf(sec.Meta.At("from"), "%s.from: missing reference (env:VAR, file:PATH or cmd:COMMAND)", sp)
		} else if _, ok, err := ParseKubeSecretRef(sec.From); ok {
			if err != nil {
				r.errorf(sec.Meta.At("from"), "%s.from: %v", sp, err)
			}
		} else if _, err := ParseSecretRef(sec.From); err != nil {
			r.errorf(sec.Meta.At("from"), "%s.from: %v", sp, err)
		}
		enum(r, &sec.Meta, sp, "as", sec.As, SecretAsEnv, SecretAsFile)
		positive(r, &sec.Meta, sp, "ttl", int64(sec.TTL))
	}
}

func checkExec(r *collector, s *Server, p string) {
	for i, a := range s.Exec.Allow {
		if err := sandboxPath(a); err != nil {
			r.errorf(s.Exec.Meta.Elem("allow", i), "%s.exec.allow[%d]: %v", p, i, err)
		}
	}
}

func checkLimits(r *collector, s *Server, p string) {
	l := &s.Limits
	p += ".limits"
	if l.Meta.Has("memory") && l.Memory < 1<<20 {
		r.errorf(l.Meta.At("memory"), "%s.memory: %s is too small (want at least 1Mi)", p, l.Memory)
	}
	positive(r, &l.Meta, p, "pids", int64(l.Pids))
	if l.Meta.Has("cpu") && !(l.CPU > 0 && l.CPU <= 1024) {
		r.errorf(l.Meta.At("cpu"), "%s.cpu: %g is out of range (want more than 0, at most 1024)", p, l.CPU)
	}
	positive(r, &l.Meta, p, "call_timeout", int64(l.CallTimeout))
	positive(r, &l.Meta, p, "output", int64(l.Output))
}

func checkLifecycle(r *collector, s *Server, p string) {
	l := &s.Lifecycle
	p += ".lifecycle"
	positive(r, &l.Meta, p, "idle", int64(l.Idle))
	positive(r, &l.Meta, p, "idle_stop", int64(l.IdleStop))
	positive(r, &l.Meta, p, "max_lifetime", int64(l.MaxLifetime))
	enum(r, &l.Meta, p, "idle_action", l.IdleAction, IdleActionPause, IdleActionStop)
	enum(r, &l.Meta, p, "restart", l.Restart, RestartNo, RestartOnFailure, RestartAlways)
	switch {
	case l.IdleStop > 0 && l.IdleAction == IdleActionStop:
		r.errorf(l.Meta.At("idle_stop"), "%s.idle_stop: only applies with idle_action: pause", p)
	case l.IdleStop > 0 && l.Idle > 0 && l.IdleStop <= l.Idle:
		r.errorf(l.Meta.At("idle_stop"), "%s.idle_stop: %s must be longer than idle (%s)", p, l.IdleStop, l.Idle)
	}
}

func checkArtifacts(r *collector, s *Server, p string) {
	a := s.Artifacts
	if a == nil {
		return
	}
	ap := p + ".artifacts"
	if a.Dir == "" {
		r.errorf(firstPos(a.Meta.At("dir"), a.Meta.Pos), "%s.dir: missing host dir", ap)
	} else {
		hostPath(r, a.Meta.At("dir"), ap+".dir", a.Dir)
	}
	if len(a.Include) == 0 {
		r.errorf(firstPos(a.Meta.At("include"), a.Meta.Pos), "%s.include: list the globs of the files to copy out", ap)
	}
	for i, g := range a.Include {
		if g == "" || strings.HasPrefix(g, "/") || slices.Contains(strings.Split(g, "/"), "..") {
			r.errorf(a.Meta.Elem("include", i), "%s.include[%d]: want a relative glob without \"..\", got %q", ap, i, g)
		} else if _, err := path.Match(strings.ReplaceAll(g, "**", "*"), ""); err != nil {
			r.errorf(a.Meta.Elem("include", i), "%s.include[%d]: invalid glob %q", ap, i, g)
		}
	}
	positive(r, &a.Meta, ap, "max_size", int64(a.MaxSize))
	if s.URL != "" {
		r.errorf(a.Meta.Pos, "%s: a remote server has no output to copy from", ap)
	}
}

func checkPin(r *collector, s *Server, p string) {
	enum(r, &s.Meta, p, "pin", s.Pin, PinEnforce, PinTOFU, PinWarn, PinOff)
	enum(r, &s.Meta, p, "scan", s.Scan, ScanWarn, ScanBlock)
	enum(r, &s.Meta, p, "results_scan", s.ResultsScan, ResultsScanOff, ResultsScanFlag, ResultsScanBlock)
}

func checkToolGlobs(r *collector, s *Server, p string) {
	t := &s.Tools
	for _, l := range []struct {
		key   string
		globs []string
	}{{"allow", t.Allow}, {"deny", t.Deny}, {"approve", t.Approve}} {
		for i, g := range l.globs {
			if err := checkGlob(g); err != nil {
				r.errorf(t.Meta.Elem(l.key, i), "%s.tools.%s[%d]: %v", p, l.key, i, err)
			}
		}
	}
	enum(r, &t.Meta, p+".tools", "default", t.Default, ActionAllow, ActionDeny, ActionApprove)
	for i, a := range t.ApproveAnnotations {
		if a != AnnotationDestructive && a != AnnotationOpenWorld {
			r.errorf(t.Meta.Elem("approve_annotations", i), "%s.tools.approve_annotations[%d]: unknown annotation %q (want %s or %s)",
				p, i, a, AnnotationDestructive, AnnotationOpenWorld)
		}
	}
	rl := &t.RateLimit
	positive(r, &rl.Meta, p+".tools.rate_limit", "per_minute", int64(rl.PerMinute))
	positive(r, &rl.Meta, p+".tools.rate_limit", "per_client_tool", int64(rl.PerClientTool))
	positive(r, &rl.Meta, p+".tools.rate_limit", "burst", int64(rl.Burst))
}

func checkGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty tool pattern")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("invalid tool pattern %q", g)
	}
	return nil
}

func checkRules(r *collector, s *Server, p string) {
	for i := range s.Tools.Rules {
		rule := &s.Tools.Rules[i]
		rp := fmt.Sprintf("%s.tools.rules[%d]", p, i)
		if err := checkGlob(rule.Tool); err != nil {
			r.errorf(rule.Meta.At("tool"), "%s.tool: %v", rp, err)
		}
		if rule.Meta.Has("when") && strings.TrimSpace(rule.When) == "" {
			r.errorf(rule.Meta.At("when"), "%s.when: must not be empty (leave it out to match always)", rp)
		}
		if rule.Action == "" && !rule.Meta.Has("action") {
			r.errorf(rule.Meta.Pos, "%s: missing action (want allow, deny or approve)", rp)
		} else {
			enum(r, &rule.Meta, rp, "action", rule.Action, ActionAllow, ActionDeny, ActionApprove)
		}
	}
}

func checkServerSandbox(r *collector, s *Server, p string) {
	checkLayers(r, &s.Sandbox, p+".sandbox")
}

func checkNetworkLimits(r *collector, s *Server, p string) {
	l := &s.Network.Limits
	lp := p + ".network.limits"
	positive(r, &l.Meta, lp, "connections", int64(l.Connections))
	positive(r, &l.Meta, lp, "bytes_per_connection", int64(l.BytesPerConnection))
	positive(r, &l.Meta, lp, "bytes_total", int64(l.BytesTotal))
	positive(r, &l.Meta, lp, "idle", int64(l.Idle))
	positive(r, &l.Meta, lp, "max_duration", int64(l.MaxDuration))
}
