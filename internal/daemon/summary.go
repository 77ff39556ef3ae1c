package daemon

// What serve says when it starts, as data: the config's warnings and what
// the lock file pins of each server (the CLI prints one line of it).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/image"
	"mcpbox/internal/instance"
	"mcpbox/internal/integrity"
	"mcpbox/internal/launch"
	"mcpbox/internal/pkginstall"
	"mcpbox/internal/policy"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/secrets"
	"mcpbox/internal/specconv"
	"mcpbox/internal/workspace"
)

// Summary is the startup summary of a config.
type Summary struct {
	// File is the config's name as its warnings give it.
	File     string
	Warnings config.Errors // config.Warnings: what a reviewer should see
	// Servers are in the config's order.
	Servers []ServerPins
}

// ServerPins is what the lock file pins of one server.
type ServerPins struct {
	Name string
	// PinOff: the server's pin is off; nothing is pinned or checked.
	PinOff bool
	// Pinned: the lock has the server's tools, Tools of them.
	Pinned bool
	Tools  int
	// Unavailable: serve could not set it up (its package did not
	// install, its image did not pull); a warning after the summary says
	// why, and a new session retries it.
	Unavailable bool
	// Installing: its package still installs, in the background; it
	// joins the sessions once installed.
	Installing bool
}

// Summarize is the summary of c against lock (nil: nothing pinned yet).
func Summarize(c *config.Config, lock *integrity.Lock) Summary {
	sum := Summary{File: c.File, Warnings: config.Warnings(c)}
	for _, s := range c.Servers {
		p := ServerPins{Name: s.Name, PinOff: s.PinMode() == config.PinOff}
		if sl := lockOf(lock, s.Name); sl != nil && sl.Tools != nil {
			p.Pinned, p.Tools = true, len(sl.Tools)
		}
		sum.Servers = append(sum.Servers, p)
	}
	return sum
}

func lockOf(lock *integrity.Lock, server string) *integrity.ServerLock {
	if lock == nil {
		return nil
	}
	return lock.Servers[server]
}

// summarize is the summary of c against the lock file at lockPath. An
// unreadable lock file stops the guard before this; here it only means
// "nothing pinned yet".
func summarize(c *config.Config, lockPath, base string) Summary {
	lock, _ := integrity.ReadLock(lockPath)
	sum := Summarize(c, lock)
	sum.Warnings = append(sum.Warnings, secretWarnings(c, "env:", "file:")...)
	sum.Warnings = append(sum.Warnings, commandWarnings(c)...)
	sum.Warnings = append(sum.Warnings, literalSecretWarnings(c)...)
	sum.Warnings = append(sum.Warnings, credentialWarnings(c, base)...)
	sum.Warnings = append(sum.Warnings, nodeProxyWarnings(c, hostNodeVersion)...)
	return sum
}

// CheckConfig is `policy check` of the config at path: it loads it,
// compiles its rules' conditions (config.Load only checks that they are
// there) and its package servers' forms (an npx or uvx form a pinned
// install cannot run), and returns the warnings a reviewer should see.
// An error reading the file wraps ErrReadingConfig; the others read
// FILE:LINE:COL: message.
func CheckConfig(path string) (config.Errors, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	src, _ := os.ReadFile(path)
	if _, err := policy.CompileWith(c, policy.Options{Source: src}); err != nil {
		return nil, err
	}
	if _, err := PackageServers(c); err != nil {
		return nil, err
	}
	return append(config.Warnings(c), checkWarnings(c, path)...), nil
}

// checkWarnings are the warnings of serve's start that `policy check`
// prints for the config c read from path: the env: references that cannot
// be read (EnvWarnings), the programs and host paths a sandbox will not
// find (commandWarnings), the credential dirs a server would see or
// that serve refuses to mount writable (credentialWarnings), a state_dir
// that serve refuses (specconv.CheckStateDir), the references that act
// on the host (hostReferenceWarnings), and what the config reaches
// beyond its project (reachWarnings). It reads the
// environment and looks paths up: no file is read, no command run, so
// that checking a config one was sent stays harmless.
func checkWarnings(c *config.Config, path string) config.Errors {
	ws := append(EnvWarnings(c), commandWarnings(c)...)
	ws = append(ws, literalSecretWarnings(c)...)
	ws = append(ws, credentialWarnings(c, filepath.Dir(path))...)
	ws = append(ws, inputWarnings(c, filepath.Dir(path))...)
	if err := specconv.CheckStateDir(c, filepath.Dir(path)); err != nil {
		pos := c.Meta.At("state_dir")
		ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col, Msg: err.Error() + ": serve refuses this config", Stops: "serve"})
	}
	ws = append(ws, hostReferenceWarnings(c)...)
	for _, w := range reachWarnings(c, filepath.Dir(path)) {
		// A place warned of already (a credential dir, refused) is not
		// named twice.
		if !slices.ContainsFunc(ws, func(o *config.Error) bool { return o.Line == w.Line && o.Col == w.Col }) {
			ws = append(ws, w)
		}
	}
	return ws
}

// reachWarnings flag, for `policy check`, what a config makes reachable
// beyond its own project, for one you did not write (a cloned
// repository's): a host dir outside the config's directory that a server
// may write (a mount rw, an output source), an image registry at a
// non-public address, which the host fetches from, and an HTTP endpoint
// that listens beyond this machine. Each is a config's own choice, with
// no symlink involved, so serve takes them as written and does not
// repeat them at every start.
func reachWarnings(c *config.Config, base string) config.Errors {
	absBase, err := filepath.Abs(base)
	if err != nil {
		return nil
	}
	var ws config.Errors
	outside := func(pos config.Pos, what, src string) {
		abs, err := filepath.Abs(specconv.Resolve(base, src))
		if err != nil || abs == absBase || strings.HasPrefix(abs, absBase+string(filepath.Separator)) {
			return
		}
		ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
			Msg: fmt.Sprintf("%s: the server may write to %s, outside the config's directory: keep it if you chose it", what, src)})
	}
	for _, s := range c.Servers {
		if s == nil || s.URL != "" || c.IsKubernetes(s) {
			continue
		}
		if r, err := image.ParseRef(s.Image.Ref); err == nil && nonPublicHost(r.Registry) {
			pos := s.Meta.At("image")
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("servers.%s.image: mcpbox fetches it from this host, outside any sandbox, at %s, a non-public address: keep it if you run that registry", s.Name, r.Registry)})
		}
		p := "servers." + s.Name + ".filesystem"
		if o := s.Filesystem.Output; o != nil && o.Source != "" {
			outside(o.Meta.At("source"), p+".output.source", o.Source)
		}
		for i, m := range s.Filesystem.Mounts {
			if m.Mode == config.ModeRW {
				outside(m.Meta.At("source"), fmt.Sprintf("%s.mounts[%d].source", p, i), m.Source)
			}
		}
	}
	if addr := c.Listen.HTTP.Addr; addr != "" {
		if host, _, err := config.SplitHostPort(addr); err == nil && !config.IsLoopbackHost(host) {
			pos := c.Listen.HTTP.Meta.At("addr")
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("listen.http.addr: serve listens on %s, beyond this machine: whoever reaches it with a client's token gets that client's tools (and, with role admin, the dashboard)", addr)})
		}
	}
	return ws
}

// inputWarnings flag, for `policy check`, each local server whose
// filesystem.input is not a directory serve can show, or one of whose
// mounts has no source serve can show (missing, a file for a dir,
// through a symlink): every start of it fails. serve's start says so as
// the server's setup error instead.
func inputWarnings(c *config.Config, base string) config.Errors {
	var ws config.Errors
	for _, s := range c.Servers {
		if s == nil || s.URL != "" || c.IsKubernetes(s) {
			continue
		}
		cannot := func(key string, pos config.Pos, err error) {
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("servers.%s.filesystem.%s: %v: server %s cannot start", s.Name, key, err, s.Name), Stops: "server " + s.Name})
		}
		in, err := specconv.InputDir(s, base)
		if err != nil {
			cannot("input.source", s.Filesystem.Input.Meta.At("source"), err)
			continue
		}
		for i, m := range s.Filesystem.Mounts {
			if err := specconv.MountSource(base, in, m); err != nil {
				cannot(fmt.Sprintf("mounts[%d].source", i), m.Meta.At("source"), err)
			}
		}
	}
	return ws
}

// hostReferenceWarnings flag, for `policy check`, the references that
// make mcpbox itself act on the host, outside any sandbox, for a config
// one did not write: a cmd: reference runs its program, as the user
// (at a server's start, or serve's, or at pin), and a file: one in a
// credential dir or another hidden entry of the home hands that file's
// contents to the server. Both are a config's own choice (a password
// manager's command, a token file), and a cloned repository's config can
// make them too. serve does not repeat them at every start.
func hostReferenceWarnings(c *config.Config) config.Errors {
	home, _ := os.UserHomeDir()
	var ws config.Errors
	check := func(pos config.Pos, what, ref string) {
		scheme, arg, _ := strings.Cut(ref, ":")
		msg := ""
		switch scheme {
		case "cmd":
			msg = fmt.Sprintf("runs %s on this host as you, outside any sandbox: read what it runs before you serve a config you did not write", strconv.Quote(arg))
		case "file":
			p := arg
			if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
				p = filepath.Join(home, rest)
			}
			abs, err := filepath.Abs(p)
			if err != nil || home == "" || home == "/" {
				return
			}
			real, realHome := workspace.ResolveExisting(abs), workspace.ResolveExisting(home)
			place := cmp.Or(workspace.CredentialDir(home, real), workspace.HiddenEntry(realHome, real))
			if place == "" {
				return
			}
			msg = fmt.Sprintf("hands %s (in %s) to the server: mount or name only what it needs", arg, place)
		default:
			return
		}
		ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col, Msg: what + ": " + ref[:len(scheme)+1] + " " + msg})
	}
	token := func(t config.Token, parent config.Meta, key, what string) {
		check(firstPos(t.Meta.At("from"), parent.At(key)), what+".from", t.From)
	}
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		p := "servers." + s.Name
		for _, sec := range s.Secrets {
			if in := sec.Inject; in != nil && in.AWS != nil {
				a := in.AWS
				check(a.Meta.At("access_key_id"), p+".secrets."+sec.Name+".inject.aws.access_key_id", a.AccessKeyID)
				check(a.Meta.At("secret_access_key"), p+".secrets."+sec.Name+".inject.aws.secret_access_key", a.SecretAccessKey)
				check(a.Meta.At("session_token"), p+".secrets."+sec.Name+".inject.aws.session_token", a.SessionToken)
				continue
			}
			check(firstPos(sec.Meta.At("from"), sec.Meta.Pos), p+".secrets."+sec.Name+".from", sec.From)
		}
		for _, h := range s.Headers {
			check(firstPos(h.Meta.At("from"), h.Meta.Pos), p+".headers."+h.Name+".from", h.From)
		}
		for _, q := range s.Query {
			check(firstPos(q.Meta.At("from"), q.Meta.Pos), p+".query."+q.Name+".from", q.From)
		}
		if o := s.OAuth; o != nil {
			token(o.ClientID, o.Meta, "client_id", p+".oauth.client_id")
			token(o.ClientSecret, o.Meta, "client_secret", p+".oauth.client_secret")
		}
	}
	for i, cl := range c.Clients {
		token(cl.Token, cl.Meta, "token", fmt.Sprintf("clients[%d].token", i))
	}
	token(c.OAuth.StoreKey, c.OAuth.Meta, "store_key", "oauth.store_key")
	return ws
}

// nonPublicHost reports whether hostPort names this machine or an address
// the host's own fetches refuse unless the config trusts it
// (egress.BlockedReason: private, link-local, metadata, ...), in any
// spelling an image reference allows (a port or none, brackets, a zone,
// a mapped IPv4). A name other than localhost is not resolved here.
func nonPublicHost(hostPort string) bool {
	host, _, err := config.SplitHostPort(hostPort)
	if err != nil { // no port: "[fd00::1]", "10.0.0.1"
		host = strings.TrimSuffix(strings.TrimPrefix(hostPort, "["), "]")
	}
	if config.IsLoopbackHost(host) {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && egress.BlockedReason(a) != ""
}

// firstPos is the first known of ps.
func firstPos(ps ...config.Pos) config.Pos {
	for _, p := range ps {
		if p.Line > 0 {
			return p
		}
	}
	return config.Pos{}
}

// credentialWarnings flags each host source of a server's filesystem
// (base: the config's directory) that shows one of the home dir's
// credential dirs (~/.ssh, ~/.aws, ~/.config, ...; workspace.CredentialDir):
// read-only, the config's choice, but a cloned repository's config can
// make it, and the server could send the keys out; writable, what serve
// refuses at the start, named here with the config's position.
func credentialWarnings(c *config.Config, base string) config.Errors {
	home, err := os.UserHomeDir()
	if err != nil || home == "/" {
		return nil
	}
	if abs, err := filepath.Abs(base); err == nil {
		base = abs // a config named by a relative path: "."
	}
	realHome, realBase := workspace.ResolveExisting(home), workspace.ResolveExisting(base)
	root, err := instance.Root()
	if err == nil {
		root = workspace.ResolveExisting(root)
	}
	holds := func(dir, p string) bool { return strings.HasPrefix(p+"/", strings.TrimSuffix(dir, "/")+"/") }
	var ws config.Errors
	warn := func(s *config.Server, key string, pos config.Pos, src string, writable bool) {
		real := workspace.ResolveExisting(specconv.Resolve(base, src))
		msg, stops := "", "serve"
		if writable {
			if err := (workspace.Protected{Home: home, Project: base}).Check(real); err != nil {
				msg = fmt.Sprintf("serve refuses it: %v", err)
			}
		} else if holds(real, realHome) {
			msg = fmt.Sprintf("serve refuses it: %s is or holds your home directory %s, ~/.ssh and all", src, home)
		} else if root != "" && (holds(real, root) || holds(root, real)) {
			msg = fmt.Sprintf("serve refuses it: %s would show mcpbox's state root %s, every project's bearer token and all", src, root)
		} else if cred := workspace.CredentialDir(home, real); cred != "" {
			msg, stops = fmt.Sprintf("%s shows %s to the sandbox: credentials the server can read, and send wherever its network reaches; mount it only if the server needs them", src, cred), ""
		} else if hidden := workspace.HiddenEntry(realHome, real); hidden != "" && !holds(realBase, real) {
			// ~/.netrc, ~/.git-credentials, a browser's profile: a
			// list of credential dirs would miss one.
			msg, stops = fmt.Sprintf("%s shows %s to the sandbox: a hidden file or directory of your home, where programs keep settings, tokens and keys the server can read; mount it only if the server needs it", src, hidden), ""
		}
		if msg != "" {
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col, Msg: fmt.Sprintf("servers.%s.filesystem.%s: %s", s.Name, key, msg), Stops: stops})
		}
	}
	for _, s := range c.Servers {
		fs := s.Filesystem
		if in := fs.Input; in != nil && in.Source != "" {
			warn(s, "input.source", in.Meta.At("source"), in.Source, false)
		}
		if out := fs.Output; out != nil && out.Source != "" {
			warn(s, "output.source", out.Meta.At("source"), out.Source, true)
		}
		for i, m := range fs.Mounts {
			warn(s, fmt.Sprintf("mounts[%d].source", i), m.Meta.At("source"), m.Source, m.Mode == config.ModeRW)
			if m.Mode == config.ModeRW && m.Git == config.ModeRW {
				pos := m.Meta.At("git")
				ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col, Msg: fmt.Sprintf(
					"servers.%s.filesystem.mounts[%d].git: rw lets the server change the .git of the repositories in %s (hooks, config), which git runs on this host at your next git command there: set it only for a server you trust", s.Name, i, m.Source)})
			}
		}
		if fs.Template != "" { // copied into a workspace the server writes
			warn(s, "template", fs.Meta.At("template"), fs.Template, false)
		}
	}
	return ws
}

// untilUsable says what a start that fails on the secret error err of
// ref needs: a value it can read, or, read already, a usable one. An env:
// variable is read from serve's own environment, which no later session
// changes: serve must start again with it.
func untilUsable(err error, ref string) string {
	ve := (*secrets.ValueError)(nil)
	usable := errors.As(err, &ve)
	switch {
	case strings.HasPrefix(ref, "env:") && usable:
		return "until serve is started again with a usable value in it"
	case strings.HasPrefix(ref, "env:"):
		return "until serve is started again with the variable set"
	case usable:
		return "until it has a usable value"
	}
	return "until it can be read"
}

// EnvWarnings flags each env: reference of c's servers whose variable is
// not set (or too short) here, as serve's start-up does; policy check
// prints them. It reads the environment only: no file, no command, so
// that checking a config one was sent stays harmless.
func EnvWarnings(c *config.Config) config.Errors { return secretWarnings(c, "env:") }

// secretWarnings flags each reference of a kind in kinds ("env:",
// "file:") of a server's secrets, headers and query parameters that
// cannot be read now (an unset variable, a missing file, a value too
// short): every start of that server would fail on it, and without this
// serve would say so only when a client connects, after a start-up line
// saying "no warnings". Only the cheap, side-effect-free kinds are read,
// the way a start reads them (a named pipe or a device is only looked
// up, see secrets.Check); cmd: references are not run here (they may
// prompt or take time), and kubernetes: ones are read from the cluster
// at each start. A warning names the reference, never a value.
func secretWarnings(c *config.Config, kinds ...string) config.Errors {
	var ws config.Errors
	for _, s := range c.Servers {
		if s != nil {
			ws = append(ws, serverSecretWarnings(c, s, kinds...)...)
		}
	}
	// A client's token: serve over HTTP does not start without it.
	for i, cl := range c.Clients {
		ref := cl.Token.From
		if ref == "" || !slices.ContainsFunc(kinds, func(k string) bool { return strings.HasPrefix(ref, k) }) {
			continue
		}
		if err := launch.CheckSecret(context.Background(), ref); err != nil {
			pos := cl.Token.Meta.At("from")
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("clients[%d].token.from: %v: serve over HTTP cannot start %s", i, err, untilUsable(err, ref)), Stops: "serve over HTTP"})
		}
	}
	return ws
}

// lacksEnvSecret is why server s of c cannot start in this serve: an
// env: reference of its whose variable is unset (or its value unusable).
// serve's environment does not change, so the server is unavailable
// from the start, its package not installed. nil for a group member: a
// group's sandbox is built for all its members at once (wiring.servers).
func lacksEnvSecret(c *config.Config, s *config.Server) error {
	if strings.HasPrefix(s.Placement, config.PlacementGroup) {
		return nil
	}
	if ws := serverSecretWarnings(c, s, "env:"); len(ws) > 0 {
		return &SetupError{Server: s.Name, Err: errors.New(ws[0].Msg)}
	}
	return nil
}

// serverSecretWarnings are secretWarnings of server s.
func serverSecretWarnings(c *config.Config, s *config.Server, kinds ...string) config.Errors {
	var ws config.Errors
	check := func(pos config.Pos, what, ref string) {
		if ref == "" || !slices.ContainsFunc(kinds, func(k string) bool { return strings.HasPrefix(ref, k) }) {
			return
		}
		if err := launch.CheckSecret(context.Background(), ref); err != nil {
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("servers.%s.%s: %v: server %s cannot start %s", s.Name, what, err, s.Name, untilUsable(err, ref)), Stops: "server " + s.Name})
		}
	}
	for _, sec := range s.Secrets {
		what := "secrets." + sec.Name
		if in := sec.Inject; in != nil && in.AWS != nil {
			check(sec.Meta.Pos, what+".inject.aws.access_key_id", in.AWS.AccessKeyID)
			check(sec.Meta.Pos, what+".inject.aws.secret_access_key", in.AWS.SecretAccessKey)
			check(sec.Meta.Pos, what+".inject.aws.session_token", in.AWS.SessionToken)
			continue
		}
		check(sec.Meta.Pos, what, sec.From)
		if sec.Inject != nil && strings.HasPrefix(sec.From, "env:") && slices.Contains(kinds, "env:") {
			// Added at the proxy: a value too short for a placeholder
			// fails every start (credinject.New).
			if v, err := launch.ResolveSecret(context.Background(), sec.Name, sec.From, false); err == nil {
				if err := credinject.CheckValue(string(v.Value), sec.Inject.Shape); err != nil {
					ws = append(ws, &config.Error{File: c.File, Line: sec.Meta.Pos.Line, Col: sec.Meta.Pos.Col,
						Msg: fmt.Sprintf("servers.%s.%s.inject: %s: %v: server %s cannot start with it", s.Name, what, sec.From, err, s.Name), Stops: "server " + s.Name})
				}
			}
		}
	}
	for _, h := range s.Headers {
		check(h.Meta.Pos, "headers."+h.Name, h.From)
	}
	for _, q := range s.Query {
		check(q.Meta.Pos, "query."+q.Name, q.From)
	}
	return ws
}

// commandWarnings flags a local server whose program is not where its
// sandbox will look: a bare name in none of the sandbox PATH's
// directories (the host's own, seen read-only), or an absolute path
// under the host's system directories that does not exist. Such a server
// fails every start with "executable file not found", which serve would
// otherwise report only when a client connects. Commands the sandbox
// resolves elsewhere are not judged: an image's root, a package runner
// (npx, uvx: installed by mcpbox), a PATH of the server's own env, an
// absolute path into a mount, a pod.
func commandWarnings(c *config.Config) config.Errors {
	var ws config.Errors
	for _, s := range c.Servers {
		if s == nil || s.URL != "" || s.Image.Ref != "" || c.BackendOf(s).Kind == config.BackendKubernetes {
			continue
		}
		key, args := "command", s.Command[min(1, len(s.Command)):]
		if len(s.Command) == 0 {
			key, args = "args", s.Args
		}
		if paths := hostPathArgs(s, args); len(paths) > 0 {
			pos := s.Meta.At(key)
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("servers.%s.%s: %s: host paths the sandbox does not show; give a directory as filesystem.input (seen as /workspace/input) or in filesystem.mounts, and name it by its path there", s.Name, key, strings.Join(paths, ", "))})
		}
		if len(s.Command) == 0 {
			continue
		}
		if _, _, ok, _ := pkginstall.FromCommand(s.Command); ok {
			continue
		}
		ownPATH := false
		for _, e := range s.Env {
			ownPATH = ownPATH || e.Name == "PATH"
		}
		prog := s.Command[0]
		why := ""
		switch {
		case !ownPATH && !hostProgram(prog):
			why = missingProgram(prog)
			if !strings.Contains(prog, "/") {
				why += "; install it there, or give its absolute path inside a mount"
			}
		case filepath.IsAbs(prog) && !inSandboxView(s, filepath.Clean(prog)):
			why = prog + " is a host path the sandbox does not show: it sees the host's system directories (read-only), /workspace/input, /workspace/output, a /tmp of its own and the server's filesystem.mounts; mount the program's directory and name it by its path there"
		}
		if why != "" {
			pos := s.Meta.At("command")
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("servers.%s.command: %s: server %s cannot start", s.Name, why, s.Name), Stops: "server " + s.Name})
		}
	}
	return ws
}

// literalSecretWarnings flag a credential-shaped string (a GitHub token,
// an AWS key: redact.Shaped) written into a server's command or env in
// the config. It is no configured secret, so nothing knows its value: it
// is masked by its shape where mcpbox shows a command (the dashboard, the
// audit), but it is in the config, in the sandbox's process list, and in
// whatever the server prints of it. A warning names where, never the
// value.
func literalSecretWarnings(c *config.Config) config.Errors {
	var ws config.Errors
	const fix = "looks like a credential written into the config: give it as a secret instead, e.g. secrets: {NAME: {from: env:VAR}}, which mcpbox redacts by its value everywhere"
	for _, s := range c.Servers {
		for _, f := range []struct {
			key  string
			argv []string
		}{{"command", s.Command}, {"args", s.Args}} {
			for i, a := range f.argv {
				if redact.Shaped(a) {
					pos := s.Meta.At(f.key)
					ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col, Msg: fmt.Sprintf("servers.%s.%s[%d] %s", s.Name, f.key, i, fix)})
				}
			}
		}
		for _, e := range s.Env {
			if redact.Shaped(e.Value) {
				ws = append(ws, &config.Error{File: c.File, Line: e.Pos.Line, Col: e.Pos.Col, Msg: fmt.Sprintf("servers.%s.env.%s %s", s.Name, e.Name, fix)})
			}
		}
	}
	return ws
}

// hostPathArgs are the arguments of server s (in its own --flag=PATH
// form too) that name a path that exists on the host outside what its
// sandbox shows: a client config's `npx server-filesystem /home/me/docs`
// passes every check and then fails inside the sandbox.
func hostPathArgs(s *config.Server, args []string) []string {
	var paths []string
	for _, a := range args {
		if f, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(f, "-") {
			a = v
		}
		if !filepath.IsAbs(a) {
			continue
		}
		p := filepath.Clean(a)
		if p == "/" || inSandboxView(s, p) {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	return paths
}

// inSandboxView reports whether the clean absolute path p may lie in what
// server s's sandbox shows: its system directories and /etc, its
// workspace, a mount, or the kernel's file systems. /tmp is the sandbox's
// own, empty at start.
func inSandboxView(s *config.Server, p string) bool {
	for _, dir := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/workspace", "/proc", "/dev", "/run"} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	for _, m := range s.Filesystem.Mounts {
		if p == m.Target || strings.HasPrefix(p, strings.TrimSuffix(m.Target, "/")+"/") {
			return true
		}
	}
	return false
}

// missingProgram says why the sandbox will not find prog, for which
// hostProgram is false.
func missingProgram(prog string) string {
	if strings.Contains(prog, "/") {
		return prog + " does not exist on the host, whose system directories the sandbox shows read-only"
	}
	return fmt.Sprintf("%s is in none of the sandbox's PATH directories (%s, the host's, read-only)", prog, sandbox.DefaultPATH)
}

// sandboxLookPath is the host path of the executable name that the
// sandbox's PATH (sandbox.DefaultPATH, the host's dirs read-only) finds,
// or "".
func sandboxLookPath(name string) string {
	for _, dir := range filepath.SplitList(sandbox.DefaultPATH) {
		bin := filepath.Join(dir, name)
		if fi, err := os.Stat(bin); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return bin
		}
	}
	return ""
}

// hostProgram reports whether prog is, or may be, a program the sandbox
// finds: a bare name in a directory of sandbox.DefaultPATH, an absolute
// path under a system directory that exists, or any other path (a
// mount's, a relative one: not judged here).
func hostProgram(prog string) bool {
	if !strings.Contains(prog, "/") {
		return sandboxLookPath(prog) != ""
	}
	for _, sys := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(prog, sys) {
			_, err := os.Stat(prog)
			return err == nil
		}
	}
	return true
}

// Line is the summary as serve prints it, e.g. "mcpbox.yaml: 2 servers: github (12 tools pinned),
// docs (tools not yet pinned); 1 warning above", or with a server that
// could not be set up "... docs (unavailable); no config warnings; why 1
// server could not be set up below".
func (sum Summary) Line() string {
	parts := make([]string, 0, len(sum.Servers))
	down := 0
	for _, s := range sum.Servers {
		state := pinState(s)
		switch {
		case s.Unavailable:
			state, down = "unavailable", down+1
		case s.Installing:
			state = "installing"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", s.Name, state))
	}
	// With servers down, whose warnings follow this line, a bare "no
	// warnings" would deny them: the count is of the config's.
	noun := "warning"
	if down > 0 {
		noun = "config warning"
	}
	w := "no " + noun + "s"
	if n := len(sum.Warnings); n > 0 {
		w = Plural(n, noun) + " above"
	}
	if down > 0 {
		w += "; why " + Plural(down, "server") + " could not be set up below"
	}
	return fmt.Sprintf("%s: %s: %s; %s", sum.File, Plural(len(sum.Servers), "server"), strings.Join(parts, ", "), w)
}

// pinState says how many of the server's tools the lock pins.
func pinState(s ServerPins) string {
	switch {
	case s.PinOff:
		return "pinning off"
	case !s.Pinned:
		return "tools not yet pinned"
	}
	return Plural(s.Tools, "tool") + " pinned"
}

// Plural is "1 noun" or "N nouns".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
