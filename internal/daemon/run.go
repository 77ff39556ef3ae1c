package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/launch"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
)

// ServerOptions are one sandboxed server served over stdio (`mcpbox
// run`). Name and Spec are required.
type ServerOptions struct {
	// Name names the server in the log and the gateway.
	Name string
	// Spec is the server's sandbox, its command in Spec.Args and its
	// secrets resolved.
	Spec sandbox.Spec
	// Allow and Deny filter the tools by glob; nil Allow: every tool.
	Allow, Deny []string
	// CallTimeout cancels a tool call; zero: the gateway's default.
	CallTimeout time.Duration
	// MaxOutput bounds a tool result in bytes; zero: no bound.
	MaxOutput int64
	// Stdin and Stdout carry the MCP session; Stderr gets the log and the
	// server's stderr (nil: discarded).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// LogLevel is the log's threshold; zero: info.
	LogLevel slog.Level
	// Version is what the gateway tells the client it is.
	Version string
	// StateDir holds the package store and pins when the command is a
	// package runner (npx -y PKG, uvx PKG, ...: runpkg.go); "": the
	// current dir's project state dir.
	StateDir string
}

// RunServer serves one sandboxed server over stdio until the client goes
// away, ctx ends or a signal arrives (then it returns nil). A gateway
// that cannot be built is a *ConfigError, and so is a system without
// local sandboxes (sandbox.ErrNeedsLinux: macOS).
func RunServer(ctx context.Context, o ServerOptions) error {
	if err := sandbox.LocalSupported(goos); err != nil {
		return configError(err)
	}
	setupCtx, endSetup := context.WithCancel(ctx)
	stopWatch := watchHangup(o.Stdout, endSetup) // a client that stops reading during an install
	err := runPackage(setupCtx, &o)
	stopWatch()
	gone := setupCtx.Err() != nil // ctx ended or the client hung up
	endSetup()
	if gone {
		return nil // nothing to serve
	}
	if err != nil {
		return err
	}
	gatewayGC()
	defer runProcs(o.Spec.Network)()
	// The spec's secrets are resolved already: the book learns them now.
	book := &redact.Book{}
	log := newLogger(o.Stderr, o.LogLevel, book)
	if len(o.Spec.Args) > 0 && !slices.ContainsFunc(o.Spec.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) && !hostProgram(o.Spec.Args[0]) {
		// As serve's start-up line does: else every start fails, said only
		// once a client is connected (and to no one when it has gone).
		log.Warn(missingProgram(o.Spec.Args[0]) + ": the server cannot start")
	}
	l := launch.NewLocal(launch.LocalOptions{
		Name: o.Name, Spec: o.Spec, Log: log, Book: book,
		Stderr: o.Stderr,
	})
	allow := o.Allow
	if len(allow) == 0 {
		allow = []string{"*"}
	}
	readOnly := guard.NewReadOnlyHint(log)
	// Whether the server ever ran for a session, and how its last start
	// failed: a run whose server never started exits with that reason.
	var ran atomic.Bool
	var failed atomic.Pointer[string]
	gw, err := gateway.New([]*gateway.Server{{
		Name: o.Name, Scope: gateway.ScopeAgent, Launch: launch.On(l),
		Allow: allow, Deny: o.Deny, CallTimeout: o.CallTimeout, MaxOutput: o.MaxOutput,
		Restart: gateway.RestartOnFailure,
	}}, gateway.Options{
		Logger:  log,
		Version: o.Version,
		Hooks: gateway.Hooks{
			// Every payload that leaves the server is redacted before
			// anything else sees it.
			Filter: func(server string, raw []byte) []byte {
				raw = book.JSON(raw)
				readOnly.See(server, raw)
				return raw
			},
			Call: guard.CredentialCheck(log, nil),
			Session: func(ev gateway.SessionEvent) {
				if !ev.End {
					ran.Store(true) // its one server started for it
				}
			},
			Restart: func(ev gateway.RestartEvent) {
				if strings.HasPrefix(ev.Reason, "failed to start") {
					failed.Store(&ev.Reason)
				}
			},
		},
	})
	if err != nil {
		return configError(err)
	}
	surviveBrokenPipes()
	ctx, cancel := SignalContext(ctx)
	defer cancel()
	// The session closes in when ctx ends, which ends a read that waits
	// for a client still attached.
	in, out, release := clientStdio(o.Stdin, o.Stdout)
	err = gw.ServeStdio(ctx, gateway.LocalAgent, in, out)
	gw.Close()
	release()
	if err != nil && ctx.Err() == nil {
		return err
	}
	if why := failed.Load(); why != nil && !ran.Load() {
		return fmt.Errorf("server %s never started: it %s", o.Name, book.String(*why))
	}
	return nil
}

// runProcs runs the Go code of a `mcpbox run` whose sandbox has no way
// out on one processor (issue 19: the gateway's overhead on a small
// call). Such a process has one client and one server and no egress
// proxy, and a call is a chain of goroutines each woken by the last
// (the client's reader, the call's worker, the server's reader). With
// an idle processor at hand every one of those wake-ups also wakes an
// idle thread, which finds nothing to run and sleeps again; with one
// processor the goroutine woken runs next on the same thread. A sandbox
// with egress keeps the default: its proxy relays in this process.
// GOMAXPROCS overrides it. The returned function restores the setting.
func runProcs(n sandbox.Network) (restore func()) {
	if os.Getenv("GOMAXPROCS") != "" || n.Enabled() {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(1)
	return func() { runtime.GOMAXPROCS(prev) }
}
