package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/workspace"
)

// gatewayGC tunes the collector for a gateway: it moves large messages
// through fresh buffers, and on VMs where a page fault costs tens of
// microseconds, collecting (and handing memory back) less often pays;
// the memory a gateway holds stays small either way. GOGC overrides it.
func gatewayGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// newLogger is the gateway's log: text lines on stderr, redacted.
func (e *env) newLogger(book *redact.Book) *slog.Logger {
	return slog.New(slog.NewTextHandler(redactingWriter{e.stderr, book}, &slog.HandlerOptions{Level: e.logLevel}))
}

// gatewayOptions wires the book into the gateway: every payload that
// leaves a server is redacted before anything else sees it. credentials
// maps server names to their config.Credentials policy.
func gatewayOptions(log *slog.Logger, book *redact.Book, credentials map[string]string) gateway.Options {
	return gateway.Options{
		Logger:  log,
		Version: Version,
		Hooks: gateway.Hooks{
			Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) },
			Call:   credentialCheck(log, credentials),
		},
	}
}

// credentialCheck applies a server's credentials policy to its tool
// results (for run, which has no guard).
func credentialCheck(log *slog.Logger, policy map[string]string) func(context.Context, *gateway.Call, func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	return func(ctx context.Context, c *gateway.Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
		raw, err := next(ctx)
		if err != nil {
			return raw, err
		}
		raw, _, _ = applyCredentials(log, policy[c.Server], c, raw)
		return raw, nil
	}
}

// applyCredentials applies a credentials policy (config.Credentials*;
// "" is flag) to a tool result: credential-shaped strings that are not
// our secrets (those are redacted already) are flagged in the log,
// redacted, or block the result. It returns the result to pass on, the
// rules that matched and whether it blocked.
func applyCredentials(log *slog.Logger, action string, c *gateway.Call, raw json.RawMessage) (json.RawMessage, []string, bool) {
	found := redact.Detect(raw)
	if len(found) == 0 {
		return raw, nil, false
	}
	var rules []string
	for _, f := range found {
		if !slices.Contains(rules, f.Rule) {
			rules = append(rules, f.Rule)
		}
	}
	if action == "" {
		action = config.CredentialsFlag
	}
	log.Warn("credential-shaped string in a tool result", "server", c.Server, "tool", cmpOr(c.Name, c.Tool), "agent", c.Agent, "rules", strings.Join(rules, ","), "action", action)
	switch action {
	case config.CredentialsRedact:
		return redact.Mask(raw, found), rules, false
	case config.CredentialsBlock:
		res, _ := refusal(fmt.Sprintf("mcpbox: the result of %s was blocked: it contains what looks like a credential (%s)", cmpOr(c.Name, c.Tool), strings.Join(rules, ", ")), nil)
		return res, rules, true
	}
	return raw, rules, false
}

// configServers turns a config's servers into gateway servers. The guard
// decides which tools are visible and callable, so the gateway's own
// name filter lets every tool through.
func (e *env) configServers(c *config.Config, base, stateDir string, log *slog.Logger, book *redact.Book, g *guard) ([]*gateway.Server, error) {
	var out []*gateway.Server
	groups := &groupSet{c: c, base: base, launchers: map[string]*groupLauncher{}, newLauncher: func(first *config.Server) *sandboxLauncher {
		l := &sandboxLauncher{log: log, book: book, stderr: e.stderr, stateDir: stateDir, observer: observerOf(g)}
		if g != nil {
			l.protected = g.protected
		}
		if first.Filesystem.Output != nil && first.Filesystem.Output.Source == "" {
			l.workspaces = filepath.Join(stateDir, "workspaces")
		}
		return l
	}}
	for _, s := range c.Servers {
		gs := &gateway.Server{
			Name:        s.Name,
			Prefix:      c.EffectivePrefix(s),
			Scope:       s.Scope,
			Allow:       []string{"*"},
			CallTimeout: time.Duration(s.Limits.CallTimeout),
			MaxOutput:   int64(s.Limits.Output),
			Restart:     s.Lifecycle.EffectiveRestart(),
			Idle:        time.Duration(s.Lifecycle.Idle),
			IdleAction:  s.Lifecycle.IdleAction,
			IdleStop:    time.Duration(s.Lifecycle.IdleStop),
			MaxLifetime: time.Duration(s.Lifecycle.MaxLifetime),
		}
		if gs.Scope == "" {
			gs.Scope = gateway.ScopeAgent
		}
		for _, sec := range s.Secrets {
			// The shortest ttl decides when the sandbox is renewed.
			if ttl := time.Duration(sec.TTL); ttl > 0 && (gs.Refresh == 0 || ttl < gs.Refresh) {
				gs.Refresh = ttl
			}
		}
		if s.URL != "" {
			rl := &remoteLauncher{url: s.URL, headers: map[string]string{}, book: book}
			for _, h := range s.Headers {
				rl.headers[h.Name] = h.From
			}
			gs.Launch = launchOn(rl)
			// A dropped connection is reconnected at the next request
			// (remote servers take no lifecycle settings).
			gs.Restart = gateway.RestartOnFailure
			out = append(out, gs)
			continue
		}
		if g, ok := strings.CutPrefix(s.Placement, config.PlacementGroup); ok {
			gl, idx, err := groups.member(g, s)
			if err != nil {
				return nil, err
			}
			gs.Launch = gl.member(idx)
			gs.Release = gl.sandbox.Release
			out = append(out, gs)
			continue
		}
		spec := sandbox.Spec{}
		if err := serverSpec(c, s, base, &spec); err != nil {
			return nil, err
		}
		if err := hideStateDir(&spec, stateDir); err != nil {
			return nil, fmt.Errorf("server %s: %w", s.Name, err)
		}
		if g != nil {
			if err := protectFiles(&spec, g.protected); err != nil {
				return nil, fmt.Errorf("server %s: %w", s.Name, err)
			}
		}
		spec.Args = s.Command
		if s.Builtin != "" {
			if err := builtinSpec(s, &spec); err != nil {
				return nil, fmt.Errorf("server %s: %w", s.Name, err)
			}
		}
		l := &sandboxLauncher{
			name: s.Name, base: spec, secrets: s.Secrets, log: log, book: book,
			stderr: e.stderr, observer: observerOf(g),
		}
		if s.Filesystem.Output != nil && s.Filesystem.Output.Source == "" {
			l.workspaces = filepath.Join(stateDir, "workspaces")
		}
		if in := s.Filesystem.Input; in != nil && in.Mode == config.ModeOverlay {
			l.overlays = filepath.Join(stateDir, "workspaces")
		}
		var err error
		if t := s.Filesystem.Template; t != "" {
			if l.template, err = templateSource(base, spec.Input, t); err != nil {
				return nil, fmt.Errorf("server %s: filesystem.template: %w", s.Name, err)
			}
		}
		if t := e.snapshotFor(s.Name); t != "" {
			l.template = t
		}
		if a := s.Artifacts; a != nil {
			l.artifacts = &workspace.ArtifactRules{Include: a.Include, MaxSize: int64(a.MaxSize)}
			if l.artifactsDir, err = outputDir(base, spec.Input, a.Dir, 0o700, protectedPlaces(spec.Input, stateDir)); err != nil {
				return nil, fmt.Errorf("server %s: artifacts.dir: %w", s.Name, err)
			}
		}
		gs.Launch = launchOn(l)
		gs.Release = l.Release
		out = append(out, gs)
	}
	return out, nil
}

// hideStateDir refuses a spec that would show the state dir (other agents'
// workspaces, the admin socket) inside the sandbox, or put a host dir of
// the sandbox inside it.
func hideStateDir(spec *sandbox.Spec, stateDir string) error {
	state, err := filepath.EvalSymlinks(stateDir)
	if err != nil {
		return err
	}
	within := func(a, b string) bool { return a == b || strings.HasPrefix(a, b+string(filepath.Separator)) }
	sources := []string{spec.Input, spec.Output}
	for _, m := range spec.Mounts {
		sources = append(sources, m.Source)
	}
	for _, src := range sources {
		if src != "" && (within(state, src) || within(src, state)) {
			return fmt.Errorf("%s would show mcpbox's state dir %s (other agents' workspaces, the admin socket) in the sandbox; run it from another directory or set state_dir elsewhere", src, state)
		}
	}
	return nil
}

// protectFiles refuses a spec whose writable mounts (output, rw mounts)
// contain one of paths: a sandbox could rewrite the lock file (and pin
// its own next definitions), the config or the audit's JSONL copy.
func protectFiles(spec *sandbox.Spec, paths []string) error {
	var writable []string
	if spec.Output != "" {
		writable = append(writable, spec.Output)
	}
	for _, m := range spec.Mounts {
		if m.Writable {
			writable = append(writable, m.Source)
		}
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		real := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			real = r
		} else if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			real = filepath.Join(r, filepath.Base(p))
		}
		for _, w := range writable {
			if real == w || strings.HasPrefix(real, w+string(filepath.Separator)) {
				return fmt.Errorf("the writable mount %s contains %s (the lock file, config or audit copy): a server could rewrite it; keep them outside what servers may write", w, p)
			}
		}
	}
	return nil
}

// stateDir is the config's state dir, resolved against the config file's
// directory, made absolute (the sandbox setup runs elsewhere); flag
// overrides it. With neither, the project's own state dir
// (instance.ProjectStateDir: keyed by configPath, or by base for the
// embedded default).
func stateDir(c *config.Config, configPath, base, flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = c.StateDir
	}
	var err error
	if dir == "" {
		dir, err = projectStateDir(configPath, base)
	} else {
		dir, err = filepath.Abs(resolve(base, dir))
	}
	if err != nil {
		return "", fmt.Errorf("no state dir: set state_dir or --state-dir (%w)", err)
	}
	if flag == "" && c.StateDir != "" {
		// A config's state_dir in its own dir is a project's name: a
		// symlink there must not choose where workspaces and the audit go.
		absBase, err1 := filepath.Abs(base)
		absDir, err2 := filepath.Abs(dir)
		if rel, err := filepath.Rel(absBase, absDir); err == nil && err1 == nil && err2 == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			real, err := workspace.MakeHostDir(absBase, rel, 0o700)
			if err != nil {
				return "", fmt.Errorf("creating state dir: %w", err)
			}
			return real, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating state dir: %w", err)
	}
	return dir, nil
}

// serveHTTP serves the gateway's HTTP endpoint until ctx ends, then
// shuts it down.
func (e *env) serveHTTP(ctx context.Context, gw *gateway.Gateway, addr string, opts gateway.HTTPOptions, tlsCert, tlsKey string, onListen func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, explainAddrInUse(addr, err))
	}
	opts.Addr = ln.Addr().String()
	h, err := gw.Handler(opts)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	scheme := "http"
	if tlsCert != "" {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, ln.Addr(), gateway.EndpointPath)
	e.errorf("serving MCP on %s", url)
	if onListen != nil {
		onListen(url)
	}
	errc := make(chan error, 1)
	go func() {
		if tlsCert != "" {
			errc <- srv.ServeTLS(ln, tlsCert, tlsKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Ending the sessions first ends their open streams (a client's
	// standalone GET), which Shutdown would otherwise wait out.
	gw.Close()
	// The sessions are over; what is left are requests finishing and
	// connections that never sent one (which Shutdown would wait 5 s for).
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// signalContext ends when SIGTERM, SIGINT or SIGHUP arrives.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
}
