package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"mcpbox/internal/admin"
	"mcpbox/internal/audit"
	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
	"mcpbox/internal/workspace"
)

const serveHelp = `USAGE
  mcpbox serve [--config FILE] [--stdio] [--http ADDR] [--no-auth]
  mcpbox serve --print-config

Without --config, serves the embedded default: the built-in workspace
server over the current directory (read-only at /workspace/input), with
results in ./mcpbox-out (/workspace/output), commands from an allow list,
no network and no secrets. --print-config prints that config to start
your own from. Over HTTP, the default prints the URL, its bearer token
and a client config to paste.

Runs the gateway for every server of the config file: each in its own
sandbox (per client identity, per session or shared, by the server's
scope), aggregated behind one MCP endpoint. With more than one server,
tool and prompt names are prefixed "SERVER__" (or the server's prefix).

Downstream transports: --stdio (a client launched mcpbox) and/or --http
ADDR (Streamable HTTP at http://ADDR/mcp). With neither: stdio when
standard input is a pipe, a socket or a file (a client started serve),
else (a terminal, /dev/null) HTTP on the config's listen.http.addr
(default 127.0.0.1:8765). HTTP binds loopback unless the config has
clients (bearer tokens) and TLS. SIGTERM or SIGINT stops every sandbox
and exits 0.

HTTP needs a bearer token. With clients, theirs. Without (the embedded
default too), the state dir's token file (DIR/token, mode 0600, made at
the first start and kept across restarts; mcpbox token rotate makes a
new one, which a running serve picks up). --no-auth serves HTTP without
a token, on a loopback address only: then any local process or user can
call the tools.

At start, serve prints the config's warnings and one summary line (the
servers and what the lock file pins of each). A user whose sandboxes
cannot get cgroups (see mcpbox doctor) is told what to do and serve exits
1: run it under systemd-run --user --scope -p Delegate=yes, or accept
no cgroup limits with --allow-degraded=cgroups.
`

// defaultHTTPAddr is where serve listens when nothing says otherwise.
const defaultHTTPAddr = "127.0.0.1:8765"

func (e *env) serve(args []string) int {
	fs := e.newFlagSet("serve", serveHelp)
	var (
		configPath, httpAddr, stateFlag string
		stdio, printConfig, noAuth      bool
		degraded                        degradedFlag
	)
	fs.BoolVar(&printConfig, "print-config", false, "print the embedded default config and exit")
	fs.StringVar(&configPath, "config", "", "the config `FILE` (mcpbox.yaml)")
	fs.BoolVar(&stdio, "stdio", false, "serve one MCP session on standard input and output")
	fs.StringVar(&httpAddr, "http", "", "serve Streamable HTTP on `ADDR` (HOST:PORT; port 0 picks one)")
	fs.BoolVar(&noAuth, "no-auth", false, "serve HTTP without a bearer token (loopback only; any local process can call the tools)")
	fs.StringVar(&stateFlag, "state-dir", "", "state `DIR` (overrides the config's state_dir)")
	fs.StringVar(&e.snapshot, "from-snapshot", "", "seed the new workspaces of the snapshot's server from `FILE` (mcpbox snapshot)")
	fs.Var(&degraded, "allow-degraded", "serve even when the isolation `LAYERS` (comma list of seccomp, landlock,\ncgroups, idmap; bare flag: any) are unavailable, as sandbox.require without them would")
	fs.TextVar(&e.logLevel, "log-level", slog.LevelInfo, "log `LEVEL`: debug (adds each allowed egress connection and pinned definition), info, warn or error")
	if code, stop := e.parse(fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		e.errorf("serve: unexpected arguments %q", fs.Args())
		return exitUsage
	}
	if printConfig {
		e.stdout.Write(defaultConfig)
		return 0
	}
	var c *config.Config
	var err error
	base := filepath.Dir(configPath)
	if configPath == "" {
		// The default's own error is kept: Getwd's must not overwrite it.
		if c, err = config.Load("(embedded default)", defaultConfig); err == nil {
			if base, err = os.Getwd(); err != nil {
				e.errorf("serve: %v", err)
				return 1
			}
		}
	} else {
		c, err = loadConfig(configPath)
	}
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	acceptDegraded(c, degraded)
	if !e.cgroupsReady("serve", c, args) {
		return 1
	}
	if e.snapshot != "" {
		meta, err := workspace.ReadMeta(e.snapshot)
		if err != nil {
			e.errorf("serve: --from-snapshot: %v", err)
			return exitUsage
		}
		if c.Server(meta.Server) == nil {
			e.errorf("serve: --from-snapshot: the snapshot is of server %q, which the config does not have", meta.Server)
			return exitUsage
		}
		e.snapshotServer = meta.Server
	}
	if !stdio && httpAddr == "" {
		if stdinIsClient(e.stdin) {
			stdio = true
		} else if httpAddr = c.Listen.HTTP.Addr; httpAddr == "" {
			httpAddr = defaultHTTPAddr
		}
	}
	if noAuth {
		if err := checkNoAuth(c, httpAddr); err != nil {
			e.errorf("serve: %v", err)
			return exitUsage
		}
	}
	hopts, tlsCert, tlsKey, err := httpOptions(c, base, httpAddr)
	if err != nil {
		e.errorf("serve: %v", err)
		return exitUsage
	}
	dir, err := specconv.StateDir(c, configPath, base, stateFlag)
	if err != nil {
		e.errorf("serve: %v", err)
		return 1
	}
	gatewayGC()
	book := &redact.Book{}
	for _, cl := range hopts.Clients {
		if err := book.Add("client_token_"+cl.Name, cl.Token); err != nil {
			e.errorf("serve: client %s: token: %v", cl.Name, err)
			return exitUsage
		}
	}
	log := e.newLogger(book)
	if err := guard.StateDirOwned(dir); err != nil {
		e.errorf("serve: %v", err)
		return 1
	}
	token, err := e.localToken(&hopts, dir, httpAddr, noAuth, book)
	if err != nil {
		e.errorf("serve: %v", err)
		return 1
	}
	// This instance's admin socket and record come first: other instances
	// of this state dir may run (package instance), and what crashed ones
	// left goes before this one opens the audit store or starts sandboxes.
	ctx, cancel := signalContext()
	defer cancel()
	inst, err := startInstance(ctx, c, admin.NewRecord(dir, configPath, base, stdio, httpAddr), log)
	if err != nil {
		// The gateway works without it; only the admin commands do not.
		log.Warn("admin socket unavailable: the admin commands (ps, approvals, trust, secrets rotate) cannot reach this gateway", "err", err)
	} else {
		defer inst.Close()
	}
	source := defaultConfig
	if configPath != "" {
		source, _ = os.ReadFile(configPath) // only for error positions
	}
	jsonl := c.Audit.JSONL
	if jsonl != "" {
		jsonl = specconv.Resolve(base, jsonl)
	}
	g, err := guard.New(c, guard.Options{StateDir: dir, LockPath: guard.DefaultLockPath(configPath, dir),
		JSONL: jsonl, Source: source, Shared: inst != nil && inst.Shared()}, log, book)
	if err != nil {
		e.errorf("serve: %v", err)
		return exitUsage
	}
	defer g.Close()
	e.startupSummary(c, guard.DefaultLockPath(configPath, dir))
	protected := specconv.ProtectedFiles(c, base, configPath, guard.DefaultLockPath(configPath, dir))
	servers, err := e.configServers(c, base, dir, protected, log, book, g)
	if err != nil {
		e.errorf("serve: %v", err)
		return exitUsage
	}
	gw, err := gateway.New(servers, gateway.Options{Logger: log, Version: Version, Hooks: g.Hooks()})
	if err != nil {
		e.errorf("serve: %v", err)
		return exitUsage
	}
	defer gw.Close()
	g.Attach(gw)
	if inst != nil {
		inst.Attach(g.Admin(gw))
		// Deferred last, run first: the admin handlers use the gateway and
		// the guard's audit store, so the ones in flight end before those
		// close (deferred above); the socket answers until inst.Close.
		defer inst.Detach()
	}
	if g.ChannelOn(config.ChannelWeb) {
		path, stopWeb, err := admin.ServeWeb(ctx, dir, g.Broker().Handler())
		if err != nil {
			log.Warn("approvals socket unavailable", "err", err)
		} else {
			defer stopWeb()
			if inst != nil {
				inst.Update(func(r *instance.Record) { r.Approvals = path })
			}
		}
	}
	g.Record(audit.Record{Event: audit.EventPolicyReload, Detail: map[string]string{"config": cmpOr(configPath, "(embedded default)"), "reason": "start"}})

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if httpAddr != "" {
		onListen := func(url string) {
			if inst != nil {
				inst.Update(func(r *instance.Record) { r.URL = url })
			}
			switch {
			case token != "" && configPath == "":
				e.printBanner(url, token, dir, c, base)
			case token != "":
				e.printTokenNote(dir)
			}
		}
		wg.Go(func() {
			if err := e.serveHTTP(ctx, gw, httpAddr, hopts, tlsCert, tlsKey, onListen); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	if stdio {
		wg.Go(func() {
			if err := gw.ServeStdio(ctx, gateway.LocalAgent, io.NopCloser(e.stdin), nopWriteCloser{e.stdout}); err != nil {
				errs <- err
			}
			cancel() // the client that launched us is gone
		})
	}
	wg.Wait()
	close(errs)
	code := 0
	for err := range errs {
		e.errorf("serve: %v", err)
		code = 1
	}
	return code
}

// printBanner tells the person who started the default how to connect.
// The token is shown here, for the person who started serve; the log
// redacts it.
func (e *env) printBanner(url, token, dir string, c *config.Config, base string) {
	out := "./mcpbox-out"
	if s := c.Servers[0]; s.Filesystem.Output != nil && s.Filesystem.Output.Source != "" {
		// The real path the sandbox writes to, as specconv.Server found it.
		out = specconv.Resolve(base, s.Filesystem.Output.Source)
		if real, err := specconv.HostPath(base, base, s.Filesystem.Output.Source); err == nil {
			out = real
		}
	}
	client, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"mcpbox": map[string]any{
		"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + token},
	}}}, "  ", "  ")
	fmt.Fprintf(e.stderr, `
  mcpbox workspace server
  URL:     %s
  Token:   %s
           (kept in %s across restarts; mcpbox token rotate makes a new one)
  Input:   %s (read-only)
  Output:  %s
  Client config (e.g. .mcp.json):
  %s

`, url, token, bearer.Path(dir), base, out, client)
}

// httpOptions reads the HTTP settings and clients, and refuses a
// non-loopback address without both TLS and client tokens.
func httpOptions(c *config.Config, base, addr string) (gateway.HTTPOptions, string, string, error) {
	h := c.Listen.HTTP
	opts := gateway.HTTPOptions{Addr: addr, AllowedOrigins: h.AllowedOrigins}
	for _, cl := range c.Clients {
		v, err := resolveSecret(cl.Name, cl.Token.From, false)
		if err != nil {
			return opts, "", "", fmt.Errorf("client %s: token: %w", cl.Name, err)
		}
		opts.Clients = append(opts.Clients, gateway.Client{Name: cl.Name, Token: v.Value})
	}
	var cert, key string
	if h.TLS.Cert != "" {
		cert, key = specconv.Resolve(base, h.TLS.Cert), specconv.Resolve(base, h.TLS.Key)
	}
	if addr == "" {
		return opts, cert, key, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return opts, "", "", fmt.Errorf("--http %s: %w", addr, err)
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && (cert == "" || len(opts.Clients) == 0) {
		return opts, "", "", fmt.Errorf("refusing to serve on %s without TLS (listen.http.tls) and client tokens (clients); bind 127.0.0.1 instead", addr)
	}
	return opts, cert, key, nil
}

// isTerminal reports whether r is a character device (a terminal): then a
// person started serve, not a client.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
