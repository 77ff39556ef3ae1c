package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"mcpbox/internal/admin"
	"mcpbox/internal/audit"
	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/launch"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
	"mcpbox/internal/workspace"
)

// daemon is one serve between its checks and its shutdown.
type daemon struct {
	o    Options
	c    *config.Config
	dir  string // the state dir
	lock string // the pins' lock file (guard.LockPath), once the guard is made
	book *redact.Book
	log  *slog.Logger
	// The transports: stdio, and HTTP on addr when not "".
	stdio     bool
	addr      string
	ln        net.Listener // on addr, from before the packages install
	hopts     gateway.HTTPOptions
	cert, key string
	token     string // the local token; "" when none guards HTTP
	// snapshotServer is the server o.Snapshot seeds.
	snapshotServer string
	// kubes runs the kubernetes servers; made by serve.
	kubes *kubeSetup
	// packages are the package servers' installed packages (package.go).
	packages map[string]specconv.Package
	// installing are the package servers whose package installs in the
	// background (setup.go), by name; stopInstalls cancels those
	// installs and waits for them to end.
	installing   map[string]*install
	stopInstalls func()
	// serveBy is when serve goes on whatever is still installing
	// (awaitInstalls); zero before.
	serveBy time.Time
	tracer  trace.Tracer // the calls' spans (telemetry.go); nil: none
	// warm ends the servers' warm pools (sandbox.warm_pool).
	warm []func()
	// setups are the servers serve could not set up (setup.go); made
	// with the guard.
	setups *setups
	// g is the guard, once made (listening tells it the dashboard's URL).
	g *guard.Guard
	// startOnce writes the start's audit record (started).
	startOnce sync.Once
}

// closeWarm ends the sandboxes the warm pools keep prepared.
func (d *daemon) closeWarm() {
	for _, c := range d.warm {
		c()
	}
}

// Run serves o.Config until ctx ends, a signal (SIGTERM, SIGINT,
// SIGHUP) arrives, or the stdio client goes away; a clean stop returns
// nil. Before serving it refuses what cannot be served: a *ConfigError
// for the config or options (a server of the local backend on a system
// without local sandboxes too: checkPlatform), a *CgroupsError for a server the host
// cannot limit; other errors (the state dir, the token file, the
// transports, joined when both fail) are the host's.
func Run(ctx context.Context, o Options) error {
	d, err := prepare(o)
	if err != nil {
		return err
	}
	return d.serve(ctx)
}

// prepare checks the config and options and finds the state dir, the
// transports and the HTTP credentials, in the order serve always has.
func prepare(o Options) (*daemon, error) {
	d := &daemon{o: o, c: o.Config, stdio: o.Stdio, addr: o.HTTPAddr}
	if err := checkPlatform(d.c, goos); err != nil {
		return nil, err
	}
	AcceptDegraded(d.c, o.AllowAllDegraded, o.AllowDegraded)
	if err := checkCgroups(d.c); err != nil {
		return nil, err
	}
	if err := d.readSnapshot(); err != nil {
		return nil, configError(fmt.Errorf("--from-snapshot: %w", err))
	}
	if _, err := PackageServers(d.c); err != nil { // before anything is made
		return nil, err
	}
	d.chooseTransports()
	if err := checkMetricsAddr(o.MetricsAddr); err != nil {
		return nil, configError(err)
	}
	if o.NoAuth {
		if err := checkNoAuth(d.c, d.addr); err != nil {
			return nil, configError(err)
		}
	}
	var err error
	if d.hopts, d.cert, d.key, err = httpOptions(d.c, o.Base, d.addr); err != nil {
		return nil, configError(err)
	}
	if err := jwtClients(&d.hopts, d.c); err != nil {
		return nil, configError(err)
	}
	if d.dir, err = specconv.StateDir(d.c, o.ConfigPath, o.Base, o.StateDir); err != nil {
		return nil, err
	}
	gatewayGC()
	d.book = &redact.Book{}
	for _, cl := range d.hopts.Clients {
		if err := d.book.Add("client_token_"+cl.Name, cl.Token); err != nil {
			return nil, configError(fmt.Errorf("client %s: token: %w", cl.Name, err))
		}
	}
	if err := learnURLKeys(d.book, d.c); err != nil {
		return nil, configError(err)
	}
	d.log = newLogger(o.Stderr, o.LogLevel, d.book)
	if err := guard.StateDirOwned(d.dir); err != nil {
		return nil, err
	}
	if d.token, err = localToken(&d.hopts, d.dir, d.addr, o.NoAuth, d.book, o.NoAuthWarning); err != nil {
		return nil, err
	}
	return d, nil
}

// readSnapshot finds the server o.Snapshot seeds.
func (d *daemon) readSnapshot() error {
	if d.o.Snapshot == "" {
		return nil
	}
	meta, err := workspace.ReadMeta(d.o.Snapshot)
	if err != nil {
		return err
	}
	s := d.c.Server(meta.Server)
	if s == nil {
		return fmt.Errorf("the snapshot is of server %q, which the config does not have", meta.Server)
	}
	if out := s.Filesystem.Output; out == nil || out.Source != "" {
		// Only a workspace made per scope is seeded: a fixed output dir
		// (the embedded default's ./mcpbox-out) would silently stay as it is.
		where := "no output"
		if out != nil {
			where = "the fixed output dir " + out.Source
		}
		return fmt.Errorf("the snapshot seeds the workspaces made per scope (filesystem.output: {}), and server %s has %s: unpack it there yourself (tar -xf %s -C DIR), or give the server output: {}",
			meta.Server, where, launch.ShellWord(d.o.Snapshot))
	}
	d.snapshotServer = meta.Server
	return nil
}

// chooseTransports picks stdio or HTTP when the options name neither.
func (d *daemon) chooseTransports() {
	if d.stdio || d.addr != "" {
		return
	}
	if stdinIsClient(d.o.Stdin) {
		d.stdio = true
		if IsTerminal(d.o.Stderr) {
			// A person piped something in (cmd | mcpbox serve, ssh): say
			// what serve took it for, which clients need not be told.
			fmt.Fprintln(d.o.Stderr, "mcpbox: speaking MCP on standard input and output (it is not a terminal, so serve took it for a client's); --http ADDR serves HTTP instead")
		}
	} else if d.addr = d.c.Listen.HTTP.Addr; d.addr == "" {
		d.addr = DefaultHTTPAddr
	}
}

// serve starts this instance, the guard, the servers and the gateway,
// serves the transports, and takes everything down in order.
func (d *daemon) serve(parent context.Context) (err error) {
	// This instance's admin socket and record come first: other instances
	// of this state dir may run (package instance), and what crashed ones
	// left goes before this one opens the audit store or starts sandboxes.
	// Two contexts: cancel ends serving (a signal, the stdio client gone),
	// while the signals stay caught until everything is down. The stop of
	// signal.NotifyContext unregisters them, so a SIGTERM after the client
	// closed stdin (the TypeScript SDK sends one 2 s later) would kill
	// serve half-way through stopping its sandboxes.
	surviveBrokenPipes()
	sigCtx, stopSignals := SignalContext(parent)
	defer stopSignals()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	defer func() {
		// Stopped while setting up (a signal, the client gone): what the
		// stop cut short is no error. (Before cancel runs: ctx says why.)
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
	}()
	stopWatch := func() {}
	if d.stdio {
		// A client that stops reading during the set-up ends it too.
		stopWatch = watchHangup(d.o.Stdout, cancel)
		defer stopWatch()
	}
	inst, err := d.startInstance(ctx)
	if err != nil {
		// The gateway works without it; only the admin commands do not.
		d.log.Warn("admin socket unavailable: the admin commands (ps, approvals, trust, secrets rotate) cannot reach this gateway", "err", err)
	} else {
		defer inst.Close()
	}
	tel, err := d.startTelemetry(ctx)
	if err != nil {
		return err
	}
	d.tracer = tel.Tracer()
	g, err := d.newGuard(inst)
	if err != nil {
		return configError(err)
	}
	defer g.Close()
	d.g = g
	if inst != nil {
		for _, pid := range inst.Crashed() {
			g.Record(audit.Record{Event: audit.EventGatewayCrash, Detail: map[string]string{"pid": strconv.Itoa(pid)},
				Error: "a serve of this state dir ended without stopping: the calls it had in flight have no record"})
		}
	}
	d.setups = d.newSetups(ctx, g, inst)
	defer d.stopTelemetry(tel) // after the gateway closed, before the guard
	// The dashboard's and metrics' audit follower starts from the head
	// before any call, and stops before the guard closes.
	w, err := d.startWeb(ctx, g)
	if err != nil {
		return err
	}
	defer w.stop()
	if d.addr != "" {
		// Before the packages install: a port in use is found at once,
		// not after minutes of installs. Until the gateway serves it,
		// a client's connection waits in the backlog.
		if d.ln, err = listen(d.addr); err != nil {
			return err
		}
		defer d.ln.Close() // Serve closes it too, if it got that far
	}
	po, failed, err := d.installPackages(ctx, g)
	if d.stopInstalls != nil {
		// After the gateway closed, whose starts wait for them; before
		// the guard, which their audit records go to.
		defer d.stopInstalls()
	}
	if ctx.Err() != nil {
		return nil // stopped while installing, as below
	}
	if err != nil {
		return err
	}
	defer d.closeWarm() // after the gateway closed, and if it could not be built
	d.kubes = newKubeSetup(d.o.Base, d.dir, d.log)
	defer d.kubes.close() // after the gateway has stopped every pod
	gw, err := d.newGateway(ctx, g, po, failed)
	if ctx.Err() != nil {
		// Stopped while setting up (a signal, the stdio client gone,
		// watchHangup): a clean stop, not servers that failed to set up.
		if err == nil {
			gw.Close()
		}
		return nil
	}
	var sum Summary
	if d.o.Strict || d.o.Summary != nil {
		sum = summarize(d.c, d.lock, d.o.Base)
	}
	if err == nil && d.o.Strict {
		if err = cannotStart(sum.Warnings); err != nil {
			gw.Close()
		}
	}
	setup := errors.As(err, new(*SetupError)) // the servers' own error, not the config's
	if d.o.Summary != nil && (err == nil || setup) {
		// After the servers were set up, so that it names the ones that
		// could not be (reportUnavailable says why, below it). Not
		// before a config error: serve ends on it, and a summary with
		// "1 warning above" would read as a start (the warning often
		// being the refusal the error repeats).
		sum.Warnings = append(sum.Warnings, d.loginWarnings()...)
		down, installing := d.setups.state()
		for i := range sum.Servers {
			name := sum.Servers[i].Name
			_, sum.Servers[i].Unavailable = down[name]
			if installing[name] {
				sum.Servers[i].Unavailable, sum.Servers[i].Installing = false, true
			}
		}
		d.o.Summary(sum)
	}
	if setup {
		return err
	}
	if err != nil {
		return configError(err)
	}
	defer gw.Close()
	d.reportUnavailable()
	g.Attach(gw)
	// The extra listeners' handlers use the gateway: they stop before it.
	defer w.closeListeners()
	if err := d.attach(w, g, gw, inst); err != nil {
		return err
	}
	if inst != nil {
		inst.Attach(g.Admin(gw))
		// Runs before gw.Close and g.Close (deferred above): the admin
		// handlers use the gateway and the guard's audit store, so the ones
		// in flight end before those close. Only the approvals web endpoint
		// (deferred below) stops earlier; the socket answers until
		// inst.Close.
		defer inst.Detach()
	}
	if stop := d.serveWeb(ctx, g, inst); stop != nil {
		defer stop()
	}
	stopWatch() // the session reads the client from here on
	return d.serveTransports(ctx, cancel, gw, inst)
}

// cannotStart is, for --strict, the first server that the start's
// warnings ws say cannot start on this machine (a secret's variable unset,
// a program not on the sandbox's PATH): serve ends at its start on it as
// on a package that does not install (or a missing input or mount
// source, which the servers' set-up finds).
func cannotStart(ws config.Errors) error {
	for _, w := range ws {
		if server, ok := strings.CutPrefix(w.Stops, "server "); ok {
			return &SetupError{Server: server, Err: fmt.Errorf("server %s cannot start (--strict): %s", server, w.Error())}
		}
	}
	return nil
}

// started records the start in the audit log, once serve takes clients:
// a serve whose port is taken has not started.
func (d *daemon) started() {
	d.startOnce.Do(func() {
		d.g.Record(audit.Record{Event: audit.EventPolicyReload, Detail: map[string]string{"config": cmpOr(d.o.ConfigPath, "(embedded default)"), "reason": "start"}})
	})
}

// startInstance opens this serve's admin socket and writes its record
// (admin.Start), removing what crashed gateways left on the state dir
// (cleanLeftovers): session workspaces only if no other instance is live.
func (d *daemon) startInstance(ctx context.Context) (*admin.Instance, error) {
	rec := admin.NewRecord(d.dir, d.o.ConfigPath, d.o.Base, d.stdio, d.addr)
	return startInstance(ctx, d.c, rec, d.log)
}

func startInstance(ctx context.Context, c *config.Config, rec instance.Record, log *slog.Logger) (*admin.Instance, error) {
	return admin.Start(ctx, rec, admin.InstanceOptions{
		Config: c,
		Logger: log,
		Leftovers: func(shared bool) {
			if err := cleanLeftovers(rec.StateDir, shared, log); err != nil {
				log.Warn("removing crash leftovers", "err", err)
			}
		},
	})
}

// newGuard opens the call pipeline and its audit store.
func (d *daemon) newGuard(inst *admin.Instance) (*guard.Guard, error) {
	source := d.o.Source
	if source == nil && d.o.ConfigPath != "" {
		source, _ = os.ReadFile(d.o.ConfigPath) // only for error positions
	}
	jsonl := d.c.Audit.JSONL
	if jsonl != "" {
		var err error
		if jsonl, err = specconv.HostFile(d.o.Base, jsonl); err != nil {
			return nil, fmt.Errorf("audit.jsonl: %w", err)
		}
	}
	lock, err := guard.LockPath(d.o.ConfigPath, d.dir)
	if err != nil {
		return nil, err
	}
	d.lock = lock
	return guard.New(d.c, guard.Options{StateDir: d.dir, LockPath: lock,
		JSONL: jsonl, Source: source, Shared: inst != nil && inst.Shared(), Tracer: d.tracer}, d.log, d.book)
}

// newGateway builds the servers' launchers and the gateway over them.
// Unless the options are strict, a server that cannot be set up (failed:
// its package did not install; its image does not pull) is left
// unavailable (d.setups), its package retried with po.
func (d *daemon) newGateway(ctx context.Context, g *guard.Guard, po packageOptions, failed map[string]error) (*gateway.Gateway, error) {
	lockPath := d.lock
	w := wiring{
		c: d.c, log: d.log, book: d.book, stderr: d.o.Stderr, guard: g,
		loginFlags: func(agent string) string { return loginFlags(d.o.ConfigPath, d.o.StateDir, agent) },
		opts: specconv.Options{Base: d.o.Base, StateDir: d.dir, Packages: d.packages,
			Protected: specconv.ProtectedFiles(d.c, d.o.Base, d.o.ConfigPath, lockPath)},
		snapshot: d.o.Snapshot, snapshotServer: d.snapshotServer,
		ctx: ctx, images: imageSetup{stateDir: d.dir, lockPath: lockPath, stderr: d.o.Stderr},
		warm:   &d.warm,
		kubes:  d.kubes,
		failed: failed, install: po.retryInstall, installing: d.installing, lockPath: lockPath,
		serveBy: d.serveBy,
	}
	if !d.o.Strict {
		w.setups = d.setups
	}
	var err error
	if w.ca, err = proxyCA(d.c); err != nil {
		return nil, err
	}
	servers, err := w.servers()
	if err != nil {
		return nil, err
	}
	return gateway.New(servers, gateway.Options{Logger: d.log, Version: d.o.Version, Hooks: g.Hooks()})
}

// serveWeb serves the approvals web endpoint when the config asks for
// it; it returns its stop, or nil.
func (d *daemon) serveWeb(ctx context.Context, g *guard.Guard, inst *admin.Instance) func() {
	if !g.ChannelOn(config.ChannelWeb) {
		return nil
	}
	path, stop, err := admin.ServeWeb(ctx, d.dir, g.Broker().Handler())
	if err != nil {
		d.log.Warn("approvals socket unavailable", "err", err)
		return nil
	}
	if inst != nil {
		inst.Update(func(r *instance.Record) { r.Approvals = path })
	}
	return stop
}

// serveTransports serves stdio and HTTP until ctx ends; the end of the
// stdio session or a failing HTTP server ends both.
func (d *daemon) serveTransports(ctx context.Context, cancel context.CancelFunc, gw *gateway.Gateway, inst *admin.Instance) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if d.addr != "" {
		h := httpServer{gw: gw, addr: d.addr, ln: d.ln, opts: d.hopts, tlsCert: d.cert, tlsKey: d.key,
			onListen: func(url string) { d.started(); d.listening(inst, url) }}
		wg.Go(func() {
			if err := h.serve(ctx); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	if d.stdio {
		wg.Go(func() {
			// The input is closed by the session when ctx ends (a
			// signal): a client still attached does not keep serve reading.
			in, out, release := clientStdio(d.o.Stdin, d.o.Stdout)
			defer release()
			if d.addr == "" {
				d.started() // with HTTP too, once it listens
			}
			if err := gw.ServeStdio(ctx, gateway.LocalAgent, in, out); err != nil {
				errs <- err
			}
			cancel() // the client that launched us is gone
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// listening records the URL and tells the caller.
func (d *daemon) listening(inst *admin.Instance, url string) {
	if inst != nil {
		inst.Update(func(r *instance.Record) {
			r.URL = url
			if d.token != "" {
				r.TokenFile = bearer.Token.Path(d.dir)
			}
		})
	}
	if b, ok := strings.CutSuffix(url, gateway.EndpointPath); ok && d.g != nil && d.hopts.Extra["/ui/"] != nil {
		d.g.SetDashboard(loopbackBase(b) + "/ui/")
	}
	if d.o.Listening != nil {
		d.o.Listening(Listening{URL: url, Token: d.token, StateDir: d.dir})
	}
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
