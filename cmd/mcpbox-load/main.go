//go:build linux

// Command mcpbox-load drives `mcpbox serve --http` with many concurrent MCP
// clients and reports throughput, latency, errors, the gateway's resources
// over time and the audit check. See docs/reliability.md and package
// mcpbox/internal/load.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"mcpbox/internal/load"
)

func main() {
	var o load.Options
	flag.StringVar(&o.Scenario, "scenario", "calls", "calls (sessions making tool calls) or churn (sessions opened and closed: the leak check)")
	flag.StringVar(&o.Server, "server", "builtin", "builtin (the workspace server), npm (server-everything) or both")
	flag.IntVar(&o.Clients, "clients", 1, "client identities (tokens)")
	flag.IntVar(&o.Sessions, "sessions", 0, "MCP sessions, spread over the clients (0: one per client)")
	flag.IntVar(&o.Calls, "calls", 0, "tool calls per session (0: 100; churn: 1)")
	flag.IntVar(&o.Concurrency, "concurrency", 0, "calls: calls in flight per session (0: 1); churn: sessions open at once (0: 4)")
	flag.Float64Var(&o.Rate, "rate", 0, "calls: pace the load at this many calls/s in all (0: each call right after the last: max throughput)")
	flag.StringVar(&o.Scope, "scope", "", "the servers' scope: agent, session or shared (default agent; churn: session)")
	flag.IntVar(&o.IdleCalls, "idle", 0, "sequential calls measuring the idle p99 (0: 200, -1: none)")
	flag.DurationVar(&o.Settle, "settle", 0, "churn: wait after the sandboxes are gone before measuring (0: 5s)")
	flag.DurationVar(&o.SampleEvery, "sample", 0, "interval of the resource samples (0: 1s)")
	flag.StringVar(&o.Mcpbox, "mcpbox", "", "the mcpbox binary (default: mcpbox in PATH)")
	flag.StringVar(&o.NodeModules, "node-modules", "test/e2e/node/node_modules", "node_modules holding @modelcontextprotocol/server-everything")
	serveFlags := flag.String("serve-flags", "", "extra flags for mcpbox serve, space separated")
	flag.BoolVar(&o.Keep, "keep", false, "keep the temp dir (config, state dir, audit)")
	flag.StringVar(&o.URL, "url", "", "an existing gateway's endpoint instead of starting one")
	tokens := flag.String("tokens", "", "with -url: a file of client tokens, one a line")
	flag.StringVar(&o.StateDir, "state-dir", "", "with -url: the gateway's state dir")
	flag.IntVar(&o.PID, "pid", 0, "with -url: the gateway's pid, to sample its resources")
	printConfig := flag.String("write-config", "", "write a config for -url runs into `DIR` (tokens in DIR/tokens and the env vars it prints) and exit")
	asJSON := flag.Bool("json", false, "print the report as JSON (with every sample) on stdout, the summary on stderr")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	timeout := flag.Duration("timeout", time.Hour, "give up after this long")
	flag.Parse()

	if *printConfig != "" {
		nm := ""
		if o.Server != load.ServerBuiltin {
			nm = o.NodeModules
		}
		cfg, env, err := load.WriteConfig(*printConfig, max(o.Clients, 1), defaultScope(o), nm)
		if err != nil {
			fatal(err)
		}
		var toks []string
		for _, e := range env {
			_, tok, _ := strings.Cut(e, "=")
			toks = append(toks, tok)
		}
		tf := filepath.Join(*printConfig, "tokens")
		if err := os.WriteFile(tf, []byte(strings.Join(toks, "\n")+"\n"), 0o600); err != nil {
			fatal(err)
		}
		fmt.Printf("# config: %s, tokens (for -tokens): %s; serve it with:\n", cfg, tf)
		for _, e := range env {
			fmt.Println("export " + e)
		}
		return
	}
	if *serveFlags != "" {
		o.ServeFlags = strings.Fields(*serveFlags)
	}
	if *tokens != "" {
		b, err := os.ReadFile(*tokens)
		if err != nil {
			fatal(err)
		}
		o.Tokens = strings.Fields(string(b))
	}
	if !*quiet {
		o.Progress = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "mcpbox-load: "+format+"\n", args...)
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	rep, err := load.Run(ctx, o)
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			enc.Encode(rep)
			rep.Print(os.Stderr)
		} else {
			rep.Print(os.Stdout)
		}
	}
	if err != nil {
		fatal(err)
	}
	if len(rep.Problems()) > 0 {
		os.Exit(1)
	}
}

func defaultScope(o load.Options) string {
	switch {
	case o.Scope != "":
		return o.Scope
	case o.Scenario == load.ScenarioChurn:
		return "session"
	}
	return "agent"
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mcpbox-load:", err)
	os.Exit(2)
}
