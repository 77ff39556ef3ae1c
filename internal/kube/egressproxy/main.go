package egressproxy

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"mcpbox/internal/podagent"
)

// Where the proxy's pods find their config (the Secret's mount) and
// listen.
const (
	DefaultConfigFile = "/run/mcpbox/egress/config.json"
	DefaultPort       = 3128
)

// Main is `mcpbox egress-proxy`, the program of the proxy's pods: it
// serves until SIGTERM or SIGINT (exit 0), reading the config file again
// every --reload when it changed, and writes the decision log to stdout.
//
//	mcpbox egress-proxy --listen $(MCPBOX_POD_IP):3128 --config /run/mcpbox/egress/config.json
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpbox egress-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", fmt.Sprintf(":%d", DefaultPort), "address to serve the pods on")
	file := fs.String("config", DefaultConfigFile, "the proxy's config (JSON: key and allowlists)")
	reload := fs.Duration("reload", 10*time.Second, "how often to look for a changed config")
	var ro registryOptions
	fs.StringVar(&ro.listen, "registry-listen", "", "address of the gateway's registration endpoint (mutual TLS; needs --tls-dir); empty: none")
	fs.StringVar(&ro.tlsDir, "tls-dir", "", "directory of the endpoint's tls.crt, tls.key and ca.crt (from the gateway's pod CA)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mcpbox egress-proxy [--listen ADDR] [--config FILE]\n\nThe egress proxy of a gateway's Kubernetes pods (runs in the proxy's pods).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil || fs.NArg() > 0 || *reload <= 0 || (ro.listen == "") != (ro.tlsDir == "") {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *listen, *file, *reload, ro, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "mcpbox egress-proxy: %v\n", err)
		return 1
	}
	return 0
}

// registryOptions are Main's flags of the registration endpoint.
type registryOptions struct{ listen, tlsDir string }

// run serves until ctx ends.
func run(ctx context.Context, listen, file string, reload time.Duration, ro registryOptions, stdout, stderr io.Writer) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading the config: %w", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	p, err := New(Options{Config: cfg, Log: stdout})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		p.Close()
		return err
	}
	fmt.Fprintf(stderr, "mcpbox egress-proxy: serving %d servers' allowlists on %s\n", len(cfg.Servers), l.Addr())
	served := make(chan error, 2)
	go func() { served <- p.Serve(l) }()
	if ro.listen != "" {
		conf, err := podagent.ServerTLS(filepath.Join(ro.tlsDir, "tls.crt"), filepath.Join(ro.tlsDir, "tls.key"), filepath.Join(ro.tlsDir, "ca.crt"))
		if err != nil {
			l.Close()
			p.Close()
			return fmt.Errorf("the registration endpoint: %w", err)
		}
		rl, err := net.Listen("tcp", ro.listen)
		if err != nil {
			l.Close()
			p.Close()
			return fmt.Errorf("the registration endpoint: %w", err)
		}
		defer rl.Close()
		// A replica starts with no registration: until the gateway's
		// next send, its pods' credential hosts are refused (fail closed).
		fmt.Fprintf(stderr, "mcpbox egress-proxy: registration endpoint (mutual TLS) on %s; no pod registered until the gateway sends its state\n", rl.Addr())
		go func() { served <- p.ServeRegistry(rl, conf, stderr) }()
	}
	// The registration certificate as mounted: the kubelet refreshes
	// the TLS Secret's volume when the gateway renews it, which is how a
	// replica whose certificate expired (the gateway could not verify it
	// to send the renewed one) gets the new one.
	var tlsSeen []byte
	if ro.listen != "" {
		tlsSeen, _ = readTLS(ro.tlsDir)
	}
	tick := time.NewTicker(reload)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return p.Close()
		case err := <-served:
			p.Close()
			return err
		case <-tick.C:
			if ro.listen != "" {
				tlsSeen = reloadTLS(p, ro.tlsDir, tlsSeen, stderr)
			}
			// A mounted Secret changes by a symlink swap; reading the
			// file again sees the new one. A bad new config keeps the
			// old one in force.
			b, err := os.ReadFile(file)
			if err != nil || bytes.Equal(b, raw) {
				continue
			}
			raw = b // said once per change
			if c, err := ParseConfig(b); err != nil {
				fmt.Fprintf(stderr, "mcpbox egress-proxy: keeping the old config: %v\n", err)
			} else if err := p.SetConfig(c); err == nil {
				fmt.Fprintf(stderr, "mcpbox egress-proxy: config reloaded (%d servers)\n", len(c.Servers))
			}
		}
	}
}

// readTLS reads the mounted certificate and key, for comparison.
func readTLS(dir string) ([]byte, error) {
	cert, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, err
	}
	return append(append(cert, 0), key...), nil
}

// reloadTLS serves the mounted certificate if it changed since seen
// (Proxy.ReloadRegistryTLS) and returns what it read: said once per
// change. A pair read across the kubelet's swap does not match and is
// tried again when the mount next differs.
func reloadTLS(p *Proxy, dir string, seen []byte, stderr io.Writer) []byte {
	b, err := readTLS(dir)
	if err != nil || bytes.Equal(b, seen) {
		return seen
	}
	cert, key, _ := bytes.Cut(b, []byte{0})
	switch changed, err := p.ReloadRegistryTLS(cert, key); {
	case err != nil:
		fmt.Fprintf(stderr, "mcpbox egress-proxy: keeping the registration certificate: the mounted one: %v\n", err)
	case changed:
		fmt.Fprintf(stderr, "mcpbox egress-proxy: registration certificate reloaded from %s\n", dir)
	}
	return b
}
