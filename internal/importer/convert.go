package importer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"mcpbox/internal/config"
	"mcpbox/internal/redact"
)

// redacted replaces a credential found in an argument, URL or header.
const redacted = "REDACTED"

// projectHint begins the comment line above a server that names the
// ~/.claude.json project it came from.
const projectHint = "From the project "

// Result is what Convert makes of a client file.
type Result struct {
	// Config holds the servers of every entry that imports cleanly, in
	// file order; it has none when no entry does.
	Config *config.Config
	// Hints are comment lines per server name, which Render puts above
	// the server: egress to allow, host paths the sandbox does not see.
	Hints map[string][]string
	// Notes are what the user should read: skipped entries, renamed
	// servers, credentials replaced by REDACTED. One line each, no prefix.
	Notes []string
	// Vars are the environment variables the config reads, in first-use
	// order: the user sets them before mcpbox serve.
	Vars []Var
	// Skipped names the file's top-level entries that were left out
	// (disabled, or not importable), in file order: a rewritten client
	// config keeps them as they were (RewriteOptions.Keep).
	Skipped []string
}

// Convert turns the server entries of cf into an mcpbox config. An entry
// that does not import cleanly is left out with a note: one bad entry
// does not sink the others. Of host, only Homes is read.
func Convert(cf *ClientFile, host Host) *Result {
	im := &converter{names: make(map[string]bool), claimed: make(map[string]string), homes: host.Homes}
	im.notes = slices.Clone(cf.projectNotes)
	c, hints := im.convert(cf.entries)
	for _, p := range cf.local {
		if p.dir != cf.project && len(p.entries) > 0 {
			names := make([]string, len(p.entries))
			for i, m := range p.entries {
				names[i] = strconv.Quote(m.key)
			}
			im.notef("project %s has servers of its own, not imported (Claude Code runs them only in its sessions): %s; to import them, give --project %s",
				config.PrintableLine(p.dir), strings.Join(names, ", "), config.PrintableLine(config.ShellQuote(p.dir)))
		}
	}
	return &Result{Config: c, Hints: hints, Notes: im.notes, Vars: im.vars, Skipped: im.skipped}
}

func (im *converter) notef(format string, args ...any) {
	im.notes = append(im.notes, fmt.Sprintf(format, args...))
}

// skip notes why entry m is left out and, for a top-level one, names it
// in Result.Skipped.
func (im *converter) skip(m member, format string, args ...any) {
	im.notef(format, args...)
	if m.project == "" {
		im.skipped = append(im.skipped, m.key)
	}
}

// convert returns a config of every entry that imports cleanly and the
// comment lines for each server; entries that do not are noted and left out.
func (im *converter) convert(entries []member) (*config.Config, map[string][]string) {
	c := &config.Config{Version: 1}
	hints := make(map[string][]string)
	for _, m := range entries {
		var ent mcpEntry
		if err := json.Unmarshal(m.val, &ent); err != nil {
			if te, ok := err.(*json.UnmarshalTypeError); ok {
				err = fmt.Errorf("%s: got a JSON %s, want %s", te.Field, te.Value, te.Type)
			}
			im.skip(m, "skipping server %q: %v", m.key, err)
			continue
		}
		if ent.Disabled {
			im.skip(m, "skipping server %q: disabled", m.key)
			continue
		}
		name := uniqueName(sanitizeName(m.key), im.names)
		saved := converter{names: im.names, claimed: maps.Clone(im.claimed), vars: slices.Clone(im.vars), notes: slices.Clone(im.notes), skipped: slices.Clone(im.skipped)}
		s, h, err := im.server(name, m.key, &ent)
		if err == nil {
			err = checkServer(s)
		}
		if err != nil {
			*im = saved
			im.skip(m, "skipping server %q: %v", m.key, err)
			continue
		}
		of := ""
		if m.project != "" {
			// ~/.claude.json: one config for the servers of every project.
			project := config.Printable(m.project) // the file chose it: also in a YAML comment
			of = " (of project " + project + ")"
			h = append([]string{projectHint + project + "."}, h...)
		}
		if name != m.key {
			im.notef("server %q%s is called %s in mcpbox.yaml", m.key, of, name)
		}
		im.names[name] = true
		c.Servers = append(c.Servers, s)
		hints[name] = h
	}
	return c, hints
}

// checkServer validates s alone, so that one bad entry (say, a plain-http
// remote URL) does not sink the others.
func checkServer(s *config.Server) error {
	c := &config.Config{Version: 1, Servers: []*config.Server{s}}
	raw, err := c.Marshal()
	if err != nil {
		return err
	}
	_, err = config.Load("", raw)
	if es := config.AsErrors(err); es != nil {
		msgs := make([]string, len(es))
		for i, e := range es {
			msgs[i] = e.Msg // a line of YAML the user never sees is no help
		}
		return fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return err
}

func (im *converter) server(name, orig string, ent *mcpEntry) (*config.Server, []string, error) {
	typ := strings.ToLower(ent.Type)
	local, remote := ent.Command != "", ent.URL != ""
	switch {
	case local && remote:
		return nil, nil, fmt.Errorf("has both command and url")
	case typ != "" && typ != "stdio" && typ != "http" && typ != "sse" && typ != "streamable-http":
		return nil, nil, fmt.Errorf("unknown type %q", ent.Type)
	case remote:
		return im.remote(name, orig, ent)
	case local:
		if r, ok := mcpRemote(ent); ok {
			im.notef("server %q: its mcp-remote wrapper became a remote server that mcpbox connects to itself", orig)
			return im.remote(name, orig, r)
		}
		return im.local(name, orig, ent)
	}
	return nil, nil, fmt.Errorf("has neither command nor url")
}

func (im *converter) local(name, orig string, ent *mcpEntry) (*config.Server, []string, error) {
	if path.Base(strings.ReplaceAll(ent.Command, `\`, "/")) == "mcpbox" {
		// mcpbox run or serve inside a sandbox cannot work; a rewritten
		// client config keeps the entry as it is (Result.Skipped).
		return nil, nil, errors.New("it runs mcpbox already (" + strings.Join(append([]string{ent.Command}, ent.Args[:min(len(ent.Args), 1)]...), " ") + "); left as it is")
	}
	if s, h, ok, err := im.dockerRun(name, orig, ent); ok {
		return s, h, err
	}
	if ent.Cwd != "" || ent.EnvFile != "" {
		im.notef("server %q: cwd and envFile are not imported (the server starts in its sandbox)", orig)
	}
	s := &config.Server{
		Name:       name,
		Command:    append([]string{ent.Command}, im.scrubArgs(orig, homeRefs(ent.Args))...),
		Filesystem: config.Filesystem{Output: &config.Output{}},
		Tools:      config.Tools{Allow: []string{"*"}},
	}
	env, err := members(ent.Env)
	if err != nil {
		return nil, nil, fmt.Errorf("env: %w", err)
	}
	vals := slices.Clone(ent.Args)
	for _, m := range env {
		var v string
		if err := json.Unmarshal(m.val, &v); err != nil {
			return nil, nil, fmt.Errorf("env.%s: want a string", m.key)
		}
		im.envVar(s, orig, m.key, v)
		vals = append(vals, v)
	}
	forwards := loopbackForwards(vals)
	if len(forwards) > 0 {
		im.notef("server %q reaches %s on this machine, but in its sandbox localhost is its own: forward the port (see the comment above it)", orig, strings.Join(forwards, ", "))
	}
	for _, a := range s.Command[1:] {
		// A client's own variables (VS Code's ${workspaceFolder},
		// ${input:...}) that it replaced before it ran the command.
		if strings.Contains(a, "${") {
			im.notef("server %q: argument %s has ${...}, which the client replaced and mcpbox passes on literally: write what it stands for", orig, strconv.Quote(a))
		}
	}
	// A package runner's paths are noted by ConvertPackages, once it has
	// mounted the directories among them.
	if _, rule := launcher(s.Command); rule == "" {
		im.notes = append(im.notes, hostPathNote(orig, hostPaths(s.Command))...)
		im.notes = append(im.notes, relativePathNote(orig, s.Command[1:], false)...)
	}
	hints := append(launcherHints(s.Command), hostPathHints(s.Command)...)
	return s, append(hints, forwardHints(forwards)...), nil
}

// schemePorts are the default ports of the URL schemes a server's
// arguments name services on this machine with.
var schemePorts = map[string]string{
	"http": "80", "https": "443", "postgres": "5432", "postgresql": "5432", "mysql": "3306", "mariadb": "3306",
	"redis": "6379", "rediss": "6379", "mongodb": "27017", "amqp": "5672", "nats": "4222", "ws": "80", "wss": "443",
}

// loopbackForwards are the HOST:PORT on this machine that vals (a server's
// arguments and env values) name, as URLs or HOST:PORT: in the sandbox,
// with a loopback of its own, a network.forward reaches them.
func loopbackForwards(vals []string) []string {
	var out []string
	add := func(host, port string) {
		if _, err := strconv.Atoi(port); err != nil || !config.IsLoopbackHost(host) {
			return
		}
		if host == "localhost" || host == "" {
			host = "127.0.0.1"
		}
		hp := host + ":" + port
		if strings.Contains(host, ":") {
			hp = "[" + host + "]:" + port
		}
		if !slices.Contains(out, hp) {
			out = append(out, hp)
		}
	}
	for _, v := range vals {
		if _, after, ok := strings.Cut(v, "="); ok && strings.HasPrefix(v, "-") {
			v = after // --db=postgres://...
		}
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			add(u.Hostname(), cmp.Or(u.Port(), schemePorts[strings.ToLower(u.Scheme)]))
			continue
		}
		if h, p, err := config.SplitHostPort(v); err == nil {
			add(h, p)
		}
	}
	return out
}

// forwardHints is the comment that says how to reach forwards.
func forwardHints(forwards []string) []string {
	if len(forwards) == 0 {
		return nil
	}
	var rules []string
	for _, f := range forwards {
		rules = append(rules, fmt.Sprintf("{listen: %q, to: %q}", f, f))
	}
	return []string{
		"In its sandbox localhost is the sandbox's own; to reach " + strings.Join(forwards, ", ") + " on this",
		"machine, uncomment:",
		"network: {forward: [" + strings.Join(rules, ", ") + "]}",
	}
}

// envVar adds one variable of a local server: copied when harmless, else
// turned into a secret read from the environment.
func (im *converter) envVar(s *config.Server, orig, name, value string) {
	value = homeRef(value)
	ref, isRef := hostVarRef(value)
	if !isRef && !credentialEnv(name, value) {
		if strings.Contains(value, "${") {
			im.notef("server %q: env %s has ${...}, which mcpbox passes on literally", orig, name)
		}
		s.Env = append(s.Env, config.EnvVar{Name: name, Value: value})
		return
	}
	if !secretNameRE().MatchString(name) {
		im.notef("server %q: env %s holds a credential but is no valid secret name: left out", orig, name)
		return
	}
	use := "servers." + s.Name + ".secrets." + name
	if isRef {
		im.need(ref, use)
	} else {
		ref = im.claim(name, value, s.Name, use)
		im.fromInput(ref, value)
	}
	s.Secrets = append(s.Secrets, config.Secret{Name: name, From: "env:" + ref})
}

func (im *converter) remote(name, orig string, ent *mcpEntry) (*config.Server, []string, error) {
	s := &config.Server{Name: name, Tools: config.Tools{Allow: []string{"*"}}}
	u, masked := maskCredential(im.queryCredentials(s, ent.URL))
	if masked {
		im.notef("server %q: its url held a credential, replaced by %s: fix the url by hand", orig, redacted)
	}
	s.URL = u
	keyed := pathKey(u)
	if keyed {
		im.notef("server %q: its url's path holds what looks like a key; a path cannot take a secret reference, so the key is in the config: keep the file private (serve redacts the key from its log, the audit and errors)", orig)
	}
	switch strings.ToLower(ent.Type) {
	case "sse":
		s.Transport = config.TransportSSE // the legacy HTTP+SSE transport
	case "auto", "":
		// An mcp-remote wrapper's fallback; and an entry that names no
		// type, which a client (Cursor) tries in both transports.
		s.Transport = config.TransportAuto
	}
	headers, err := members(ent.Headers)
	if err != nil {
		return nil, nil, fmt.Errorf("headers: %w", err)
	}
	for _, m := range headers {
		var v string
		if err := json.Unmarshal(m.val, &v); err != nil {
			return nil, nil, fmt.Errorf("headers.%s: want a string", m.key)
		}
		use := fmt.Sprintf("servers.%s.headers.%s (the whole header value)", name, m.key)
		ref, ok := hostVarRef(v)
		if ok {
			im.need(ref, use)
		} else {
			ref = im.claim("MCPBOX_"+envName(name)+"_"+envName(m.key), "", name, use)
			im.fromInput(ref, v)
		}
		s.Headers = append(s.Headers, config.Header{Name: m.key, From: "env:" + ref})
	}
	var hints []string
	if masked {
		// A server reached with a credential in its URL is no OAuth one:
		// its login could not work.
		hints = append(hints, "its url held a credential, now "+redacted+": write the url by hand before serving (a key in its path stays in this file: keep it private); OAuth is not turned on")
	} else {
		hints = oauthFor(s)
	}
	if keyed {
		hints = append(hints, "its url's path holds a key (a path takes no secret reference): keep this file private; serve redacts the key from its outputs")
	}
	return s, hints, nil
}

// queryCredentials moves the credentials among raw's query parameters
// (named like one, or shaped like a token) to s.Query, each read from an
// environment variable, and returns raw without them.
func (im *converter) queryCredentials(s *config.Server, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" || u.RawQuery == "" {
		return raw
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return raw // maskCredential masks a query it cannot read whole
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q[k]
		// Names that need escaping (config refuses them) and repeated
		// parameters stay for maskCredential.
		if len(v) != 1 || k == "" || len(k) > 128 || url.QueryEscape(k) != k || !credentialParam(k, v[0]) {
			continue
		}
		use := fmt.Sprintf("servers.%s.query.%s", s.Name, k)
		ref, ok := hostVarRef(v[0])
		if ok {
			im.need(ref, use)
		} else {
			ref = im.claim("MCPBOX_"+envName(s.Name)+"_"+envName(k), "", s.Name, use)
		}
		s.Query = append(s.Query, config.Header{Name: k, From: "env:" + ref})
		delete(q, k)
	}
	if len(s.Query) == 0 {
		return raw
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// credentialParam reports whether query parameter k=v carries a
// credential: by its name, by its value's shape, or inside the JSON (or
// base64 of JSON, as Smithery's config=) it holds.
func credentialParam(k, v string) bool {
	return (config.CredentialName(k) && !pathNameRE().MatchString(k)) || config.CredentialValue(v) ||
		redact.Shaped(v) || len(config.EncodedCredentials(v, redact.Shaped)) > 0
}

// claim returns the variable that will hold value: want, unless another
// server uses want for a different value, then one named after server.
func (im *converter) claim(want, value, server, use string) string {
	v := want
	for i := 1; ; i++ {
		old, taken := im.claimed[v]
		if !taken || (old == value && value != "") {
			break
		}
		v = "MCPBOX_" + envName(server) + "_" + want
		if i > 1 {
			v += "_" + strconv.Itoa(i)
		}
	}
	if _, taken := im.claimed[v]; !taken {
		im.claimed[v] = value
		im.vars = append(im.vars, Var{Name: v, Use: use})
	}
	return v
}

// fromInput notes that the client fills variable v's value in from its
// own inputs (Var.Client): a value that holds ${input:ID} and, beside
// such references, nothing credential-shaped ("Bearer ${input:ID}"). A
// value with a credential of its own is never copied into the client's
// config.
func (im *converter) fromInput(v, value string) {
	rest := clientInputRE().ReplaceAllString(value, "")
	if rest == value || strings.Contains(rest, "${") || config.CredentialValue(rest) || redact.Shaped(rest) {
		return
	}
	for i := range im.vars {
		if im.vars[i].Name == v && im.vars[i].Client == "" {
			im.vars[i].Client = value
		}
	}
}

// ClientEnv maps each variable the client fills in from its inputs to
// its value as the client wrote it (Var.Client); nil: none.
func (r *Result) ClientEnv() map[string]string {
	var env map[string]string
	for _, v := range r.Vars {
		if v.Client != "" {
			if env == nil {
				env = map[string]string{}
			}
			env[v.Name] = v.Client
		}
	}
	return env
}

// need records that the config reads variable v, which the client config
// already took from the host's environment.
func (im *converter) need(v, use string) {
	if _, ok := im.claimed[v]; !ok {
		im.claimed[v] = "\x00ref"
		im.vars = append(im.vars, Var{Name: v, Use: use})
	}
}

var (
	secretNameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	hostVarRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}$`) })
	clientInputRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{input:[A-Za-z0-9_.-]+\}`) })
	pathNameRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(?:FILE|PATH|DIR)$`) })
	envCredNameRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)SESSION|COOKIE|AUTHORIZATION|(?:^|_)(?:AUTH|DSN|PASS)(?:$|_)`)
	})
	driveRE       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z]:[\\/]`) })
	notNameCharRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9_-]+`) })
)

// homeRef writes a value that starts with the home directory as a client
// variable names it (${HOME} or $HOME in Claude Code, ${env:HOME} and
// ${userHome} in VS Code) as ~, which import knows for a host path (a
// client expands it; mcpbox would pass "${HOME}" on literally).
func homeRef(v string) string {
	for _, h := range []string{"${HOME}", "$HOME", "${env:HOME}", "${userHome}"} {
		if rest, ok := strings.CutPrefix(v, h); ok && (rest == "" || rest[0] == '/') {
			return "~" + rest
		}
	}
	return v
}

// homeRefs is homeRef of each of args, in a new slice.
func homeRefs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		flag, val, ok := strings.Cut(a, "=")
		if ok && strings.HasPrefix(flag, "-") {
			out[i] = flag + "=" + homeRef(val)
		} else {
			out[i] = homeRef(a)
		}
	}
	return out
}

// hostVarRef returns VAR when v only refers to a host variable, as Claude
// Code (${VAR}) and VS Code (${env:VAR}) write it.
func hostVarRef(v string) (string, bool) {
	m := hostVarRE().FindStringSubmatch(v)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// credentialEnv reports whether env variable name=value holds a
// credential: by a name that usually does (config.CredentialName, or
// one for a session, a cookie, a DSN, an auth or a pass), or by its
// value's shape, a random key (config.RandomToken: 32 hex digits, a
// UUID, a long mixed string) included. A variable made a secret by
// mistake costs the user one export; one copied costs a key in a file
// that is meant to be committed.
func credentialEnv(name, value string) bool {
	return config.CredentialName(name) || envCredNameRE().MatchString(name) ||
		credentialValue(value) || config.RandomToken(value)
}

func credentialValue(v string) bool {
	_, masked := maskCredential(v)
	return masked || config.CredentialValue(v)
}

// maskCredential replaces the credentials in s: a URL's password, the
// values of credential-named query parameters, and any string with the
// shape of a known token format.
func maskCredential(s string) (string, bool) {
	out := s
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		changed := false
		if _, ok := u.User.Password(); ok {
			u.User, changed = url.UserPassword(u.User.Username(), redacted), true
		}
		// A query that does not parse whole (a ';', a bad escape) would
		// lose pairs on the way: it is masked whole.
		if q, err := url.ParseQuery(u.RawQuery); err != nil {
			u.RawQuery, changed = redacted, true
		} else if masked, ok := maskParams(q); ok {
			u.RawQuery, changed = masked, true
		}
		if q, err := url.ParseQuery(u.Fragment); u.Fragment != "" && (err != nil || config.CredentialValue(u.Fragment)) {
			u.Fragment, changed = redacted, true
		} else if masked, ok := maskParams(q); ok {
			u.Fragment, changed = masked, true
		}
		if changed {
			out = u.String()
		}
	}
	if fs := redact.Detect([]byte(out)); len(fs) > 0 {
		var b strings.Builder
		prev := 0
		for _, f := range fs {
			b.WriteString(out[prev:f.Start] + redacted)
			prev = f.End
		}
		out = b.String() + out[prev:]
	}
	return out, out != s
}

// maskParams replaces the values of q's parameters that carry a
// credential (credentialParam, any of a repeated one's values) and
// returns the encoded query, or false when none does.
func maskParams(q url.Values) (string, bool) {
	changed := false
	for k, vs := range q {
		if slices.ContainsFunc(vs, func(v string) bool { return credentialParam(k, v) }) {
			q[k], changed = []string{redacted}, true
		}
	}
	return q.Encode(), changed
}

// scrubArgs replaces credentials in a command's arguments: token-shaped
// strings, URL passwords, and the value of a flag named like a credential
// (--api-key=V or --api-key V).
func (im *converter) scrubArgs(orig string, args []string) []string {
	out := make([]string, len(args))
	credFlag := func(f string) bool {
		return strings.HasPrefix(f, "-") && config.CredentialName(f) && !pathNameRE().MatchString(f)
	}
	for i, a := range args {
		flag, _, hasValue := strings.Cut(a, "=")
		masked, changed := maskCredential(a)
		switch {
		case i > 0 && credFlag(args[i-1]) && !strings.Contains(args[i-1], "=") && !strings.HasPrefix(a, "-"):
			masked, changed = redacted, true
		case hasValue && credFlag(flag):
			masked, changed = flag+"="+redacted, true
		}
		if changed {
			im.notef("server %q: argument %d held a credential, replaced by %s: pass it another way (many servers read it from an env variable; add a secret)", orig, i+1, redacted)
		}
		out[i] = masked
	}
	return out
}

// sanitizeName makes n a valid server name; "__" is avoided since it
// separates the prefix from a tool name.
func sanitizeName(n string) string {
	n = notNameCharRE().ReplaceAllString(strings.ToLower(n), "-")
	for strings.Contains(n, "__") {
		n = strings.ReplaceAll(n, "__", "_")
	}
	n = strings.Trim(n, "-_")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-_")
	}
	if n == "" {
		return "server"
	}
	return n
}

func uniqueName(n string, taken map[string]bool) string {
	u := n
	for i := 2; taken[u]; i++ {
		sfx := "-" + strconv.Itoa(i)
		u = n[:min(len(n), 63-len(sfx))] + sfx
	}
	return u
}

// envName turns s into the upper-case part of a variable name.
func envName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, s)
}

// Egress rules for commands that fetch their package when they start.
const (
	npmEgress  = "network: {egress: [{host: registry.npmjs.org}]}"
	yarnEgress = "network: {egress: [{host: registry.yarnpkg.com}]}"
	pypiEgress = "network: {egress: [{host: pypi.org}, {host: files.pythonhosted.org}]}"
)

// launcher is argv's program in lower case without .exe or .cmd, and the
// egress rule of the registry it fetches from if it is a package runner.
func launcher(argv []string) (base, rule string) {
	base = strings.ToLower(filepath.Base(strings.ReplaceAll(argv[0], `\`, "/")))
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".exe"), ".cmd")
	sub := ""
	if len(argv) > 1 {
		sub = argv[1]
	}
	switch {
	case base == "npx" || base == "bunx" || base == "npm" && sub == "exec" || base == "pnpm" && sub == "dlx":
		rule = npmEgress
	case base == "yarn" && sub == "dlx":
		rule = yarnEgress
	case base == "uvx" || base == "pipx" && sub == "run" || base == "uv" && (sub == "tool" || sub == "run"):
		rule = pypiEgress
	}
	return base, rule
}

// launcherHints are the comments for a command that needs a registry.
func launcherHints(argv []string) []string {
	base, rule := launcher(argv)
	switch {
	case base == "docker" || base == "podman":
		return []string{
			base + " starts the server in a container of the host's daemon, which the sandbox",
			"cannot reach (its socket is root on the host: do not mount it). Run the image's",
			"server command directly instead, or keep this server out of mcpbox.",
		}
	case rule == "":
		return nil
	}
	return []string{
		base + " downloads the server's package when it starts, and the sandbox has no",
		"network. To allow the registry, uncomment:",
		rule,
	}
}

// systemDirs are the host directories the sandbox shows (read-only), or
// its own; its /tmp is a fresh tmpfs, so a host path there is not seen.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/workspace", "/dev", "/proc", "/run/secrets"}

// hostPathNote is the note for server name's command naming paths, the
// host paths its sandbox does not see; none if there are none.
func hostPathNote(name string, paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("server %q names host paths its sandbox does not see (%s): it will not find them there; give it the directories it needs as an input or mounts and change the arguments to match (see the comment above it)", name, strings.Join(paths, ", "))}
}

// hostPaths are (up to 5 of) the paths in argv that the sandbox does
// not see, quoted.
func hostPaths(argv []string) []string {
	var paths []string
	for _, a := range argv {
		if f, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(f, "-") {
			a = v
		}
		if isHostPath(a) && len(paths) < 5 {
			paths = append(paths, strconv.Quote(a))
		}
	}
	return paths
}

// isRelativePath reports whether the argument p is a relative path by
// its spelling (".", "..", "./x", "../x"): the client resolved it against
// its own working directory, which the config does not say, and the
// sandbox resolves it against its own (/workspace/output or /workspace).
func isRelativePath(p string) bool {
	return p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../")
}

// relativePathNote is the note for server name's arguments that are
// relative paths; none if there are none.
func relativePathNote(name string, args []string, mounts bool) []string {
	var rel []string
	for _, a := range args {
		if f, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(f, "-") {
			a = v
		}
		if isRelativePath(a) {
			rel = append(rel, strconv.Quote(a))
		}
	}
	if len(rel) == 0 {
		return nil
	}
	how := "write the directory meant as an absolute path in the args (import mounts it read-only) or give it as filesystem.input"
	if !mounts {
		how = "give the directory meant as filesystem.input or a mount, and change the argument to match"
	}
	return []string{fmt.Sprintf("server %q: %s: relative paths, which the client resolved against its own working directory; in the sandbox they name paths under /workspace/output (or /workspace), likely empty: %s", name, strings.Join(rel, ", "), how)}
}

// hostPathHints name the paths in argv that the sandbox does not see.
func hostPathHints(argv []string) []string {
	paths := hostPaths(argv)
	if len(paths) == 0 {
		return nil
	}
	return []string{
		"The sandbox does not see " + strings.Join(paths, ", ") + ":",
		"give a directory as filesystem: {input: {source: DIR}} (seen as",
		"/workspace/input) or in filesystem.mounts, and change the argument to match.",
	}
}

func isHostPath(p string) bool {
	if p == "~" || strings.HasPrefix(p, "~/") || driveRE().MatchString(p) {
		return true
	}
	if !strings.HasPrefix(p, "/") {
		return false
	}
	clean := filepath.Clean(p)
	for _, d := range systemDirs {
		if clean == d || strings.HasPrefix(clean, d+"/") {
			return false
		}
	}
	return true
}
