package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/image"
	"mcpbox/internal/launch"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
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

// newLogger is the gateway's log: text lines on w (nil: discarded),
// redacted with book.
func newLogger(w io.Writer, level slog.Level, book *redact.Book) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(redactingWriter{w, book}, &slog.HandlerOptions{Level: level}))
}

// redactingWriter redacts each write with the book: for the gateway's
// log, whose handler writes one whole record per Write.
type redactingWriter struct {
	w    io.Writer
	book *redact.Book
}

func (rw redactingWriter) Write(p []byte) (int, error) {
	if _, err := rw.w.Write(rw.book.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// wiring is what turning a config's servers into gateway servers needs.
type wiring struct {
	c *config.Config
	// loginFlags follow `mcpbox login NAME` in the error that asks an
	// agent to log in to a remote server (loginFlags); nil: none.
	loginFlags func(agent string) string
	opts       specconv.Options // Base, StateDir, Protected
	log        *slog.Logger
	book       *redact.Book
	// stderr gets the servers' stderr, line-prefixed.
	stderr io.Writer
	// guard observes the sandboxes' lifecycle; nil: none (pin).
	guard *guard.Guard
	// snapshot seeds the new workspaces of snapshotServer; "": none.
	snapshot, snapshotServer string
	// ca is the proxy CA of the secrets with inject; nil: per sandbox.
	ca *egress.CA
	// ctx bounds image pulls (nil: none); images pulls and pins the
	// images of image servers (image.go).
	ctx    context.Context
	images imageSetup
	// pulled, by server name, replaces the pinned image (update); nil: none.
	pulled map[string]*image.Image
	// warm collects the Close of each launcher with a warm pool; nil:
	// no warm pools (pin).
	warm *[]func()
	// kubes runs the servers of the kubernetes backend (kube.go); nil:
	// such servers are refused (only serve runs them).
	kubes *kubeSetup
	// setups, if non-nil, makes a server that cannot be set up (a
	// *SetupError) unavailable instead of failing them all (setup.go);
	// nil: the first such error is returned (pin, update, --strict).
	setups *setups
	// failed are the servers whose package did not install, with why;
	// install retries one (nil: no retry).
	failed  map[string]error
	install func(ctx context.Context, s *config.Server) (specconv.Package, error)
	// installing are the servers whose package installs in the
	// background, by name (setup.go); lockPath is where their pins go.
	installing map[string]*install
	lockPath   string
	// serveBy ends the wait for installing's packages when no other
	// server can be set up (zero: none; daemon.awaitInstalls).
	serveBy time.Time
}

// servers turns the config's servers into gateway servers. The guard
// decides which tools are visible and callable, so the gateway's own
// name filter lets every tool through. No sandbox may write the protected
// paths (opts.Protected), with a guard or without (pin).
func (w wiring) servers() ([]*gateway.Server, error) {
	var out []*gateway.Server
	var setupErrs []error
	groups := launch.NewGroups(w.c, w.opts, func(first *config.Server) launch.LocalOptions {
		lo := w.localOptions()
		if first.Filesystem.Output != nil && first.Filesystem.Output.Source == "" {
			lo.Workspaces = filepath.Join(w.opts.StateDir, "workspaces")
		}
		return lo
	})
	var installing []*install
	var setUp []<-chan struct{} // installing's setups once installed
	for _, s := range w.c.Servers {
		gs := gatewayServer(w.c, s)
		if err := lacksEnvSecret(w.c, s); err != nil && w.setups != nil {
			w.setups.unavailable(gs, err, nil) // no retry: serve's environment stays as it is
			setupErrs, out = append(setupErrs, err), append(out, gs)
			continue
		}
		if in := w.installing[s.Name]; in != nil {
			if w.setups == nil {
				// Never the command as written (npx would install inside
				// the sandbox): only a pending server waits for it.
				return nil, fmt.Errorf("server %s: its package is still installing", s.Name)
			}
			set := w.setups.installing(gs, in.done, func() (*gateway.Server, error) {
				if err := in.pinned(w.lockPath); err != nil {
					return nil, err
				}
				gs, err := w.withPackage(w.ctx, s, in.pkg)
				if err != nil && !errors.As(err, new(*SetupError)) {
					err = &SetupError{Server: s.Name, Err: err} // not the install's failure
				}
				return gs, err
			}, w.retry(s))
			installing, setUp = append(installing, in), append(setUp, set)
			out = append(out, gs)
			continue
		}
		err := w.server(groups, gs, s)
		// A group's sandbox is built for all its members at once (and
		// would run a failed npx member's command as written): a group
		// member is never left out.
		inGroup := strings.HasPrefix(s.Placement, config.PlacementGroup)
		if se := (*SetupError)(nil); errors.As(err, &se) && w.setups != nil && !inGroup {
			w.setups.unavailable(gs, se, w.retry(s))
			setupErrs = append(setupErrs, se)
			err = nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, gs)
	}
	if n := len(installing); n > 0 && len(setupErrs) == len(out)-n {
		// No other server can run (awaitInstalls counted those without
		// a package as able to): wait for the installs as when there is
		// no other, until one installs, or every one has ended or been
		// checked, or serveBy, so that serve fails at its start if none
		// can install.
		if w.log != nil {
			w.log.Info("waiting for the packages still installing before serving: no other server could be set up", "servers", len(installing))
		}
		iw := newInstallWatch(installing)
		followInstalls(installing, w.serveBy, func(in *install, checked bool) bool {
			iw.see(in, checked)
			return iw.installed == 0 && iw.unchecked > 0
		})
		if len(iw.failed) == n {
			for _, in := range iw.failed {
				setupErrs = append(setupErrs, &SetupError{Server: in.ps.Server.Name, Err: in.err})
			}
		}
	}
	// A package that has installed by now is set up before serve goes
	// on, so that its start-up summary and the first sessions find the
	// server ready (or unavailable, saying why), not still installing.
	for i, in := range installing {
		if in.ended() {
			select {
			case <-setUp[i]:
			case <-w.ctx.Done():
			}
		}
	}
	if len(out) > 0 && len(setupErrs) == len(out) {
		// Not one server could be set up: a gateway with nothing to serve
		// is no use to a client, and a client (or its supervisor) sees a
		// server that exits at once, saying why, more clearly than one
		// that refuses every session.
		return nil, errors.Join(setupErrs...)
	}
	return out, nil
}

// server sets gs up to launch s.
func (w wiring) server(groups *launch.Groups, gs *gateway.Server, s *config.Server) error {
	if err := w.failed[s.Name]; err != nil {
		// Never the command as written: an npx server would install
		// inside its sandbox.
		return &SetupError{Server: s.Name, Err: err}
	}
	switch g, ok := strings.CutPrefix(s.Placement, config.PlacementGroup); {
	case s.URL != "":
		w.remote(gs, s)
		return nil
	case w.c.IsKubernetes(s):
		return w.kube(gs, s)
	case ok:
		return member(groups, gs, g, s)
	default:
		return w.local(gs, s)
	}
}

// setsUpAlone reports whether serve can set s up on its own after its
// start (a retry, a package installed in the background): a local server
// with a sandbox of its own. A group's sandbox is built for all its
// members at once; a Kubernetes server's objects at the start.
func setsUpAlone(c *config.Config, s *config.Server) bool {
	return s.URL == "" && !c.IsKubernetes(s) && !strings.HasPrefix(s.Placement, config.PlacementGroup)
}

// retry sets s up again for a pending server (setup.go): its package
// installed now if it did not at the start, its image pulled. Only a
// server that setsUpAlone is set up anew; nil for the others (a
// Kubernetes one: restart serve).
func (w wiring) retry(s *config.Server) func(context.Context) (*gateway.Server, error) {
	if !setsUpAlone(w.c, s) {
		return nil
	}
	return func(ctx context.Context) (*gateway.Server, error) {
		_, installing := w.installing[s.Name]
		if w.failed[s.Name] == nil && !installing {
			return w.withPackage(ctx, s, specconv.Package{})
		}
		if w.install == nil {
			if err := w.failed[s.Name]; err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("server %s: its package did not install", s.Name)
		}
		pkg, err := w.install(ctx, s)
		if err != nil {
			return nil, err
		}
		return w.withPackage(ctx, s, pkg)
	}
}

// withPackage sets s up after serve's start (a retry, a background
// install), with pkg, if it has a Dir, as its package.
func (w wiring) withPackage(ctx context.Context, s *config.Server, pkg specconv.Package) (*gateway.Server, error) {
	rw := w
	rw.ctx, rw.warm = ctx, nil // no warm pool for a late server: closeWarm may have run
	if pkg.Dir != "" {
		rw.opts.Packages = maps.Clone(w.opts.Packages)
		if rw.opts.Packages == nil {
			rw.opts.Packages = map[string]specconv.Package{}
		}
		rw.opts.Packages[s.Name] = pkg
	}
	gs := gatewayServer(w.c, s)
	if err := rw.local(gs, s); err != nil {
		return nil, err
	}
	return gs, nil
}

// gatewayServer is the gateway's settings for s, without its launcher.
func gatewayServer(c *config.Config, s *config.Server) *gateway.Server {
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
	return gs
}

// learnURLKeys teaches book what of each remote server's url looks like
// a key (config.URLKeys): a key in a URL's path cannot be a secret
// reference, so it is written out in the config, and this keeps it out
// of the log, the audit, errors and results, like a secret's value.
func learnURLKeys(book *redact.Book, c *config.Config) error {
	for _, s := range c.Servers {
		if s == nil || s.URL == "" {
			continue
		}
		if err := addURLKeys(book, "url_"+s.Name, s.URL); err != nil {
			return fmt.Errorf("servers.%s.url: %w", s.Name, err)
		}
	}
	return nil
}

// addURLKeys teaches book, under name, what of the url raw looks like a
// key (config.URLKeys).
func addURLKeys(book *redact.Book, name, raw string) error {
	for _, k := range config.URLKeys(raw, redact.Shaped) {
		if len(k) < redact.MinValueLen {
			continue // too short to redact without hitting ordinary text
		}
		if err := book.Add(name, []byte(k)); err != nil {
			return err
		}
	}
	return nil
}

// remote launches gs as a connection to the remote server s.
func (w wiring) remote(gs *gateway.Server, s *config.Server) {
	headers, query := map[string]string{}, map[string]string{}
	for _, h := range s.Headers {
		headers[h.Name] = h.From
	}
	for _, q := range s.Query {
		query[q.Name] = q.From
	}
	gs.Launch = launch.On(launch.NewRemote(launch.RemoteOptions{URL: s.URL, SSE: s.Transport == config.TransportSSE, Detect: s.Transport == config.TransportAuto,
		Headers: headers, Query: query, Book: w.book, OAuth: w.remoteOAuth(s), Logger: w.serverLog(s.Name)}))
	// A dropped connection is reconnected at the next request
	// (remote servers take no lifecycle settings).
	gs.Restart = gateway.RestartOnFailure
}

// serverLog is w's logger naming the server, or nil.
func (w wiring) serverLog(name string) *slog.Logger {
	if w.log == nil {
		return nil
	}
	return w.log.With("server", name)
}

// member launches gs as member s of the group g's sandbox.
func member(groups *launch.Groups, gs *gateway.Server, g string, s *config.Server) error {
	gl, idx, err := groups.Member(g, s)
	if err != nil {
		return err
	}
	gs.Launch = gl.Launch(idx)
	gs.Release = gl.Release
	return nil
}

// local launches gs as a sandbox of its own for s.
func (w wiring) local(gs *gateway.Server, s *config.Server) error {
	spec, err := specconv.Server(w.c, s, w.opts)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, specconv.ErrNotDir) {
		// A mount source or input not made yet (or a file where a dir
		// belongs): the host's state, not a mistake in the config, and
		// it may be right at the next session, as for a package server.
		return &SetupError{Server: s.Name, Err: err}
	} else if err != nil {
		return err
	}
	if s.Image.Ref != "" {
		if err := w.applyImage(s, &spec); err != nil {
			return &SetupError{Server: s.Name, Err: err}
		}
	}
	lo := w.localOptions()
	lo.Name, lo.Spec, lo.Secrets = s.Name, spec, s.Secrets
	if s.Filesystem.Output != nil && s.Filesystem.Output.Source == "" {
		lo.Workspaces = filepath.Join(w.opts.StateDir, "workspaces")
	}
	if in := s.Filesystem.Input; in != nil && in.Mode == config.ModeOverlay {
		lo.Overlays = filepath.Join(w.opts.StateDir, "workspaces")
	}
	if t := s.Filesystem.Template; t != "" {
		if lo.Template, err = specconv.Template(w.opts.Base, spec.Input, w.opts.StateDir, t); err != nil {
			return fmt.Errorf("server %s: filesystem.template: %w", s.Name, err)
		}
	}
	if w.snapshot != "" && w.snapshotServer == s.Name {
		// Its real path: seeding refuses a template that is a link.
		if lo.Template, err = filepath.EvalSymlinks(w.snapshot); err != nil {
			return fmt.Errorf("server %s: --from-snapshot: %w", s.Name, err)
		}
	}
	if a := s.Artifacts; a != nil {
		lo.Artifacts = &workspace.ArtifactRules{Include: a.Include, MaxSize: int64(a.MaxSize)}
		if lo.ArtifactsDir, err = specconv.ArtifactsDir(w.opts, spec.Input, a.Dir); err != nil {
			return fmt.Errorf("server %s: artifacts.dir: %w", s.Name, err)
		}
	}
	if w.warm != nil {
		lo.WarmPool = w.c.WarmPool(s)
	}
	l := launch.NewLocal(lo)
	if lo.WarmPool > 0 {
		*w.warm = append(*w.warm, l.Close)
	}
	gs.Launch = launch.On(l)
	gs.Release = l.Release
	return nil
}

// localOptions are the launcher options every local server shares.
func (w wiring) localOptions() launch.LocalOptions {
	lo := launch.LocalOptions{Log: w.log, Book: w.book, Stderr: w.stderr, CA: w.ca}
	if w.guard != nil {
		// A nil *guard.Guard in the interface would not be a nil observer.
		lo.Observer = w.guard
	}
	return lo
}
