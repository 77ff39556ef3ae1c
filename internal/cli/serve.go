package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"mcpbox/internal/admin"
	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
	"mcpbox/internal/specconv"
)

const serveHelp = `USAGE
  mcpbox serve [--config FILE] [--stdio] [--http ADDR] [--no-auth] [--strict]
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
clients (bearer tokens) and TLS. HTTP also serves the dashboard (/ui/:
mcpbox ui), /metrics (the same token) and /healthz, /readyz. SIGTERM,
SIGINT or SIGHUP stops every sandbox and exits 0; a second one while it
stops exits at once.

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

A server that cannot be set up at the start (its package does not
install, its image does not pull) does not stop the others: serve says
so on stderr and runs without it. Its tools are absent, a call naming it
gets an error saying why, mcpbox ps and the dashboard list it as
unavailable, the audit log has a server_unavailable record, and each new
session retries its setup (at most every 10s). --strict exits 1 instead,
also when a warning says a server cannot start here (a secret's variable
unset), as does a start at which no server can be set up. A server that crashes
at its start is left out of the session it started for; the next
session starts it again.
`

func (e *env) serve(args []string) int {
	fs := e.newFlagSet("serve", serveHelp)
	var (
		o                   daemon.Options
		printConfig, noAuth bool
		degraded            degradedFlag
	)
	fs.BoolVar(&printConfig, "print-config", false, "print the embedded default config and exit")
	fs.StringVar(&o.ConfigPath, "config", "", "the config `FILE` (mcpbox.yaml)")
	fs.BoolVar(&o.Stdio, "stdio", false, "serve one MCP session on standard input and output")
	fs.StringVar(&o.HTTPAddr, "http", "", "serve Streamable HTTP on `ADDR` (HOST:PORT; port 0 picks one)")
	fs.BoolVar(&o.Strict, "strict", false, "exit 1 when any server cannot be set up (its package does not install, its image does not pull,\na warning says it cannot start here) instead of serving the others without it")
	fs.BoolVar(&noAuth, "no-auth", false, "serve HTTP without a bearer token (loopback only; any local process can call the tools)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "also serve /metrics, /healthz, /readyz without credentials on loopback `ADDR`")
	fs.StringVar(&o.StateDir, "state-dir", "", "state `DIR` (overrides the config's state_dir)")
	fs.StringVar(&o.Snapshot, "from-snapshot", "", "seed the new workspaces of the snapshot's server from `FILE` (mcpbox snapshot)")
	fs.Var(&degraded, "allow-degraded", "serve even when the isolation `LAYERS` (comma list of seccomp, landlock,\ncgroups, idmap; bare flag: any) are unavailable, as sandbox.require without them would")
	fs.TextVar(&o.LogLevel, "log-level", slog.LevelInfo, "log `LEVEL`: debug (adds each allowed egress connection and pinned definition), info, warn or error")
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
	var err error
	o.Base = filepath.Dir(o.ConfigPath)
	if o.ConfigPath == "" {
		o.Source = defaultConfig
		// The default's own error is kept: Getwd's must not overwrite it.
		if o.Config, err = config.Load("(embedded default)", defaultConfig); err == nil {
			if o.Base, err = os.Getwd(); err != nil {
				e.errorf("serve: %v", err)
				return 1
			}
			if p := admin.ProjectConfig(o.Base); p != "" { // a config the user wrote, silently unused
				e.errorf("note: serving the embedded default, not %s: mcpbox serve --config %[1]s serves that", filepath.Base(p))
			}
		}
	} else {
		o.Config, err = daemon.LoadConfig(o.ConfigPath)
	}
	if errors.Is(err, daemon.ErrReadingConfig) {
		e.errorf("serve: %v", err) // no FILE:LINE:COL to give
		return exitUsage
	} else if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	o.NoAuth, o.AllowAllDegraded, o.AllowDegraded = noAuth, degraded.all, degraded.layers
	o.Stdin, o.Stdout, o.Stderr, o.Version = e.stdin, e.stdout, e.stderr, version()
	e.serveOutput(&o)
	return e.serveExit(daemon.Run(context.Background(), o), args)
}

// serveOutput gives serve's callbacks: what a person sees when it starts.
func (e *env) serveOutput(o *daemon.Options) {
	o.Summary = e.startupSummary
	o.Unavailable = func(u daemon.Unavailable) {
		if u.Installing {
			e.errorf("server %s: its package is still installing; serving without it until then, it joins once installed (mcpbox ps shows it)", u.Server)
			return
		}
		e.errorf("warning: server %s is unavailable, serving the others without it: %s (%s; --strict makes this an error)", u.Server, u.Reason, u.Retry)
	}
	o.NoAuthWarning = func(addr string) {
		e.errorf("warning: --no-auth: HTTP on %s has no token: any local process or user can call the tools", addr)
	}
	o.Listening = func(l daemon.Listening) {
		e.errorf("serving MCP on %s", l.URL)
		switch {
		case l.Token != "" && o.ConfigPath == "":
			e.printBanner(l.URL, l.Token, l.StateDir, o.Config, o.Base)
		case l.Token != "":
			e.printTokenNote(l.StateDir)
		}
	}
}

// serveExit reports serve's end and turns it into an exit code: the
// config's and the flags' errors are usage errors.
func (e *env) serveExit(err error, args []string) int {
	var cg *daemon.CgroupsError
	var ce *daemon.ConfigError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &cg):
		e.cgroupsAdvice("serve", cg, args)
		return 1
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, err := range j.Unwrap() {
			e.errorf("serve: %v", err)
		}
	} else {
		e.errorf("serve: %v", err)
	}
	if errors.As(err, &ce) {
		return exitUsage
	}
	return 1
}

// printBanner tells the person who started the default how to connect.
// The token is shown only on a terminal: stderr that is not one (a
// service manager's journal, a file) may be kept and read by others,
// so it gets where the token is instead. The log redacts it.
func (e *env) printBanner(url, token, dir string, c *config.Config, base string) {
	out := "./mcpbox-out"
	if s := c.Servers[0]; s.Filesystem.Output != nil && s.Filesystem.Output.Source != "" {
		// The real path the sandbox writes to, as specconv.Server found it.
		out = specconv.Resolve(base, s.Filesystem.Output.Source)
		if real, err := specconv.HostPath(base, base, s.Filesystem.Output.Source); err == nil {
			out = real
		}
	}
	shown, kept, with := token, fmt.Sprintf("(kept in %s across restarts; mcpbox token rotate makes a new one)", bearer.Token.Path(dir)), ""
	if !daemon.IsTerminal(e.stderr) {
		shown, kept = "in "+bearer.Token.Path(dir), "(mode 0600; shown only when stderr is a terminal, since a log may keep it;\n           kept across restarts; mcpbox token rotate makes a new one)"
		token, with = "TOKEN", ", TOKEN the token in "+bearer.Token.Path(dir)
	}
	client, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"mcpbox": map[string]any{
		"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + token},
	}}}, "  ", "  ")
	fmt.Fprintf(e.stderr, `
  mcpbox workspace server
  URL:     %s
  Token:   %s
           %s
  Input:   %s (read-only)
  Output:  %s
  Dashboard: mcpbox ui (approvals, calls, sandboxes; run it here)
  Client config (e.g. .mcp.json%s):
  %s

`, url, shown, kept, base, out, with, client)
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
