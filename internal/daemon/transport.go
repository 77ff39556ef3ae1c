package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/launch"
	"mcpbox/internal/specconv"
)

// SignalContext is parent until SIGTERM, SIGINT or SIGHUP arrives: how
// mcpbox's long-running commands stop cleanly. A second such signal, at
// least repeatGap after the first and while the stop has not finished,
// ends the process at once (status 128 + the signal's number), as a
// second Ctrl-C does elsewhere: a stop that hangs needed SIGKILL before.
// (One act can deliver two at once: a closed terminal's SIGHUP from the
// shell and the kernel both, npm passing on the SIGINT its child got
// too.) A local sandbox dies with the process (its init has the
// gateway's death signal) and the next serve of the state dir removes
// what it left. SIGHUP is left alone when it is ignored (nohup). Until
// the returned function is called.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	caught := []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	if !signal.Ignored(syscall.SIGHUP) {
		caught = append(caught, syscall.SIGHUP)
	}
	signal.Notify(sigs, caught...)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		first := time.Now()
		for {
			select {
			case s := <-sigs:
				select {
				case <-done:
					return // the stop is over
				default:
				}
				if time.Since(first) < repeatGap {
					continue // the same act, delivered twice
				}
				fmt.Fprintf(os.Stderr, "mcpbox: %v again while stopping: exiting now, without waiting for the stop to finish\n", s)
				n, _ := s.(syscall.Signal)
				forceExit(128 + int(n))
				return
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
		})
		cancel()
	}
}

// surviveBrokenPipes makes a write to a closed stdout or stderr (serve's
// log piped into `head`, a log reader that went away, a client gone) an
// error, EPIPE, for the rest of the process, instead of Go's default for
// fds 1 and 2, SIGPIPE, which ended serve before it cleaned up (its
// sandboxes, its pods). For the long-running commands only: a listing
// piped into `head` should end. SIGPIPE is caught, not ignored, so the
// servers get the default back when they are started.
func surviveBrokenPipes() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// forceExit ends the process; a variable for tests.
var forceExit = os.Exit

// repeatGap is how long after the first signal a second one counts as
// another act rather than the same delivered twice; a variable for tests.
var repeatGap = time.Second

// stdinIsClient reports whether serve's standard input is a client's
// stream, so that serve speaks MCP on stdio: a pipe, a socket (what
// Node's child_process gives a child) or a file. A terminal (a person
// started serve), /dev/null (a service manager) or anything else that
// is no stream means HTTP; so does a standard input that cannot be
// examined, which no client can be talking on.
func stdinIsClient(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return r != nil // a stream handed to Main
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	switch fi.Mode().Type() {
	case os.ModeNamedPipe, os.ModeSocket, 0:
		return true
	}
	return false
}

// httpOptions reads the HTTP settings and clients, and refuses a
// non-loopback address without both TLS and client tokens.
func httpOptions(c *config.Config, base, addr string) (gateway.HTTPOptions, string, string, error) {
	h := c.Listen.HTTP
	opts := gateway.HTTPOptions{Addr: addr, AllowedOrigins: h.AllowedOrigins}
	for _, cl := range c.Clients {
		v, err := launch.ResolveSecret(context.Background(), cl.Name, cl.Token.From, false)
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
	host, err := listenHost(addr)
	if err != nil {
		return opts, "", "", err
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && (cert == "" || (len(opts.Clients) == 0 && h.OAuth == nil)) {
		return opts, "", "", fmt.Errorf("refusing to serve on %s without TLS (listen.http.tls) and client tokens (clients); bind 127.0.0.1 instead", addr)
	}
	return opts, cert, key, nil
}

// listenHost is the host of --http's HOST:PORT; its error says what
// --http takes (a bare port is a common slip).
func listenHost(addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err == nil {
		return host, nil
	}
	if _, perr := strconv.ParseUint(addr, 10, 16); perr == nil {
		return "", fmt.Errorf("--http %s: want HOST:PORT; for this host only: --http 127.0.0.1:%s", addr, addr)
	}
	return "", fmt.Errorf("--http %s: want HOST:PORT, e.g. 127.0.0.1:8080 (port 0: a free one)", addr)
}

// checkNoAuth refuses --no-auth where it cannot apply: with clients,
// whose tokens stay required, and on an address other hosts can reach.
func checkNoAuth(c *config.Config, addr string) error {
	if len(c.Clients) > 0 {
		return fmt.Errorf("--no-auth: the config has clients, whose tokens every request needs; remove one or the other")
	}
	if c.Listen.HTTP.OAuth != nil {
		return fmt.Errorf("--no-auth: the config has listen.http.oauth, whose tokens every request needs; remove one or the other")
	}
	if addr == "" {
		return nil
	}
	host, err := listenHost(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--no-auth: refusing to serve %s without a token: only a loopback address (127.0.0.1, [::1], localhost) may go without", addr)
	}
	return nil
}

// httpServer is the gateway's HTTP endpoint as serve runs it.
type httpServer struct {
	gw              *gateway.Gateway
	addr            string
	opts            gateway.HTTPOptions
	tlsCert, tlsKey string
	// onListen, if non-nil, is called with the URL once listening.
	onListen func(url string)
	// ln, if non-nil, is the listener on addr, made in advance.
	ln net.Listener
}

// listen listens on addr, saying who holds it if it is taken.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, admin.ExplainAddrInUse(addr, err))
	}
	return ln, nil
}

// serve serves the endpoint until ctx ends, then shuts it down.
func (h httpServer) serve(ctx context.Context) error {
	ln := h.ln
	if ln == nil {
		var err error
		if ln, err = listen(h.addr); err != nil {
			return err
		}
	}
	opts := h.opts
	opts.Addr = ln.Addr().String()
	handler, err := h.gw.Handler(opts)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	scheme := "http"
	if h.tlsCert != "" {
		scheme = "https"
	}
	if h.onListen != nil {
		h.onListen(fmt.Sprintf("%s://%s%s", scheme, ln.Addr(), gateway.EndpointPath))
	}
	errc := make(chan error, 1)
	go func() {
		if h.tlsCert != "" {
			errc <- srv.ServeTLS(ln, h.tlsCert, h.tlsKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return h.shutdown(srv, errc)
}

// shutdown ends the gateway's sessions, then the HTTP server.
func (h httpServer) shutdown(srv *http.Server, errc <-chan error) error {
	// Ending the sessions first ends their open streams (a client's
	// standalone GET), which Shutdown would otherwise wait out.
	h.gw.Close()
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

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
