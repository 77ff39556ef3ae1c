package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
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

// newLogger is the gateway's log: text lines on stderr, redacted.
func (e *env) newLogger(book *redact.Book) *slog.Logger {
	return slog.New(slog.NewTextHandler(redactingWriter{e.stderr, book}, &slog.HandlerOptions{Level: e.logLevel}))
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

// gatewayOptions wires the book into the gateway: every payload that
// leaves a server is redacted before anything else sees it. credentials
// maps server names to their config.Credentials policy.
func gatewayOptions(log *slog.Logger, book *redact.Book, credentials map[string]string) gateway.Options {
	return gateway.Options{
		Logger:  log,
		Version: Version,
		Hooks: gateway.Hooks{
			Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) },
			Call:   guard.CredentialCheck(log, credentials),
		},
	}
}

// configServers turns a config's servers into gateway servers. The guard
// decides which tools are visible and callable, so the gateway's own
// name filter lets every tool through. No sandbox may write the protected
// paths (specconv.ProtectedFiles), with a guard or without (pin).
func (e *env) configServers(c *config.Config, base, stateDir string, protected []string, log *slog.Logger, book *redact.Book, g *guard.Guard) ([]*gateway.Server, error) {
	var out []*gateway.Server
	opts := specconv.Options{Base: base, StateDir: stateDir, Protected: protected}
	groups := launch.NewGroups(c, opts, func(first *config.Server) launch.LocalOptions {
		lo := launch.LocalOptions{Log: log, Book: book, Stderr: e.stderr, Observer: observerOf(g)}
		if first.Filesystem.Output != nil && first.Filesystem.Output.Source == "" {
			lo.Workspaces = filepath.Join(stateDir, "workspaces")
		}
		return lo
	})
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
			headers := map[string]string{}
			for _, h := range s.Headers {
				headers[h.Name] = h.From
			}
			gs.Launch = launch.On(launch.NewRemote(launch.RemoteOptions{URL: s.URL, Headers: headers, Book: book}))
			// A dropped connection is reconnected at the next request
			// (remote servers take no lifecycle settings).
			gs.Restart = gateway.RestartOnFailure
			out = append(out, gs)
			continue
		}
		if g, ok := strings.CutPrefix(s.Placement, config.PlacementGroup); ok {
			gl, idx, err := groups.Member(g, s)
			if err != nil {
				return nil, err
			}
			gs.Launch = gl.Launch(idx)
			gs.Release = gl.Release
			out = append(out, gs)
			continue
		}
		spec, err := specconv.Server(c, s, opts)
		if err != nil {
			return nil, err
		}
		lo := launch.LocalOptions{
			Name: s.Name, Spec: spec, Secrets: s.Secrets, Log: log, Book: book,
			Stderr: e.stderr, Observer: observerOf(g),
		}
		if s.Filesystem.Output != nil && s.Filesystem.Output.Source == "" {
			lo.Workspaces = filepath.Join(stateDir, "workspaces")
		}
		if in := s.Filesystem.Input; in != nil && in.Mode == config.ModeOverlay {
			lo.Overlays = filepath.Join(stateDir, "workspaces")
		}
		if t := s.Filesystem.Template; t != "" {
			if lo.Template, err = specconv.Template(base, spec.Input, t); err != nil {
				return nil, fmt.Errorf("server %s: filesystem.template: %w", s.Name, err)
			}
		}
		if t := e.snapshotFor(s.Name); t != "" {
			lo.Template = t
		}
		if a := s.Artifacts; a != nil {
			lo.Artifacts = &workspace.ArtifactRules{Include: a.Include, MaxSize: int64(a.MaxSize)}
			if lo.ArtifactsDir, err = specconv.ArtifactsDir(opts, spec.Input, a.Dir); err != nil {
				return nil, fmt.Errorf("server %s: artifacts.dir: %w", s.Name, err)
			}
		}
		l := launch.NewLocal(lo)
		gs.Launch = launch.On(l)
		gs.Release = l.Release
		out = append(out, gs)
	}
	return out, nil
}

// serveHTTP serves the gateway's HTTP endpoint until ctx ends, then
// shuts it down.
func (e *env) serveHTTP(ctx context.Context, gw *gateway.Gateway, addr string, opts gateway.HTTPOptions, tlsCert, tlsKey string, onListen func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, admin.ExplainAddrInUse(addr, err))
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

// observerOf is g as the launchers' lifecycle observer, or nil without a
// guard (a nil *guard.Guard in the interface would not be a nil observer).
func observerOf(g *guard.Guard) launch.Observer {
	if g == nil {
		return nil
	}
	return g
}
