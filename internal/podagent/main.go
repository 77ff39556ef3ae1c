//go:build linux

package podagent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"mcpbox/internal/kube"
)

// Main is `mcpbox agent`: it parses args into a Config, runs the agent
// until SIGTERM or SIGINT (a graceful stop: exit 0) or the server's end
// (the server's exit status), and returns the exit code.
//
//	mcpbox agent --listen :8443 --cert pod.pem --key pod-key.pem --ca ca.pem \
//	    --secrets-dir /run/mcpbox/secrets -- COMMAND [ARG...]
//	mcpbox agent --copy-to /run/mcpbox/agent/mcpbox
//	MCPBOX_PROXY_CA=PEM mcpbox agent --trust-dir /run/mcpbox/trust
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpbox agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Listen, "listen", ":8443", "address to serve the gateway on")
	fs.StringVar(&cfg.CertFile, "cert", "", "the pod's certificate (PEM)")
	fs.StringVar(&cfg.KeyFile, "key", "", "the pod's key (PEM)")
	fs.StringVar(&cfg.CAFile, "ca", "", "the gateway's pod CA (PEM)")
	fs.StringVar(&cfg.SecretsDir, "secrets-dir", "", "where the gateway's secret files are written (a memory-backed volume)")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", DefaultStartTimeout, "exit if the gateway has not started the server by then")
	fs.DurationVar(&cfg.StopTimeout, "stop-timeout", DefaultStopTimeout, "the server's grace on stop, before SIGTERM and again before SIGKILL")
	fs.BoolVar(&cfg.Reap, "reap", false, "wait for the server's orphans (always on as PID 1)")
	fs.BoolVar(&cfg.Once, "once", false, "run the command as a job (an install), not a server: exit with its status")
	copyTo := fs.String("copy-to", "", "copy this executable to `PATH` (mode 0555, atomically) and exit: the init container that brings the agent into a pod")
	trustDir := fs.String("trust-dir", "", "write the image's system bundle with the proxy CA (from $"+kube.TrustCAEnv+") into `DIR` and exit: the init container that makes a pod trust the egress proxy")
	fs.IntVar(&cfg.MaxMessage, "max-message", DefaultMaxMessage, "largest JSON-RPC message either way, in bytes")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mcpbox agent --cert FILE --key FILE --ca FILE [flags] -- COMMAND [ARG...]\n\nRuns a stdio MCP server in a pod for the gateway (Kubernetes backend).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if *copyTo != "" {
		if err := CopySelf(*copyTo); err != nil {
			fmt.Fprintf(stderr, "mcpbox agent: %v\n", err)
			return 1
		}
		return 0
	}
	if *trustDir != "" {
		from, err := WriteTrust(*trustDir, "/", []byte(os.Getenv(kube.TrustCAEnv)), kube.SystemBundles)
		if err != nil {
			fmt.Fprintf(stderr, "mcpbox agent: %v\n", err)
			return 1
		}
		if from == "" {
			from = "none: the image has no system bundle"
		}
		fmt.Fprintf(stderr, "mcpbox agent: wrote the proxy CA and the image's bundle (%s) with it into %s\n", from, *trustDir)
		return 0
	}
	cfg.Command = fs.Args()
	if len(cfg.Command) == 0 || cfg.CertFile == "" || cfg.KeyFile == "" || cfg.CAFile == "" {
		fs.Usage()
		return 2
	}
	if f, ok := stderr.(*os.File); ok {
		cfg.Stderr = f
	}
	if err := hideMemory(); err != nil {
		fmt.Fprintf(stderr, "mcpbox agent: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := Run(ctx, cfg)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "mcpbox agent: %v\n", err)
	if ee := (*ExitError)(nil); errors.As(err, &ee) && ee.Code > 0 {
		return ee.Code
	}
	return 1
}
