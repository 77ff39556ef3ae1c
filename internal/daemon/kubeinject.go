package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/kube"
	"mcpbox/internal/kube/egressproxy"
	"mcpbox/internal/launch"
	"mcpbox/internal/podagent"
)

// proxyRegistry holds the registrations of this gateway's pods in one
// namespace whose secrets are added at the egress proxy, and sends them
// whole (egressproxy.State, with the interception CA) to every proxy
// replica over mutual TLS: at each change, and every
// egressproxy.ResendEvery so that a replica that restarted (and lost
// them: they live in its memory only) has them again. Until then that
// replica refuses the pods' credential hosts (fail closed).
type proxyRegistry struct {
	push sync.Mutex // one send at a time, in order

	mu      sync.Mutex
	kc      *kubeConn    // set once by setup, before any use
	pca     *podagent.CA // the gateway's client certificate, the proxy's CA
	ica     *egress.CA   // the interception CA
	log     *slog.Logger
	pods    map[string]egressproxy.Registration // guarded by mu; by pod
	quit    chan struct{}                       // guarded by mu; nil: not resending
	done    chan struct{}
	port    int  // the replicas' registration port; 0: kube.ProxyRegistryPort
	warned  bool // guarded by mu; a failed resend was logged
	stopped bool // guarded by mu; stop ran: no resending again
	// tlsCert and tlsKey are the proxy's renewed registration
	// certificate (setTLS), sent in every State; nil: not renewed yet
	// (the replicas serve the one they mounted).
	tlsCert, tlsKey []byte // guarded by mu
}

// setup makes r the registry of kc's pods (once).
func (r *proxyRegistry) setup(kc *kubeConn, pca *podagent.CA, ica *egress.CA, log *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kc == nil {
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		r.kc, r.pca, r.ica, r.log = kc, pca, ica, log
	}
}

// registerWait bounds a registration's wait for a replica that accepts
// it (the first pod's proxy may be starting).
const registerWait = 20 * time.Second

// inject returns the launch side of the registry for server.
func (r *proxyRegistry) inject(server string) *launch.KubeInject {
	return &launch.KubeInject{CA: r.ica,
		Register: func(ctx context.Context, pod string, creds []credinject.Credential, fakes map[string]credinject.Fakes) error {
			return r.register(ctx, egressproxy.Registration{Pod: pod, Server: server, Credentials: creds, Fakes: fakes})
		},
		Unregister: r.unregister,
	}
}

// register adds reg and sends the state until a replica accepted it.
func (r *proxyRegistry) register(ctx context.Context, reg egressproxy.Registration) error {
	r.mu.Lock()
	if r.pods == nil {
		r.pods = map[string]egressproxy.Registration{}
	}
	r.pods[reg.Pod] = reg
	if r.quit == nil && !r.stopped {
		r.quit, r.done = make(chan struct{}), make(chan struct{})
		go r.resend(r.quit, r.done)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, registerWait)
	defer cancel()
	for {
		n, err := r.send(ctx)
		if n > 0 {
			if err != nil {
				r.log.Warn("a replica of the egress proxy did not take the secrets' registrations; it refuses their hosts until the next send",
					"namespace", r.kc.ns, "err", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			r.unregister(reg.Pod)
			return fmt.Errorf("registering pod %s's secrets with the egress proxy: no replica took them: %w", reg.Pod, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// setTLS makes the State carry the proxy's renewed registration
// certificate, and sends it now and every egressproxy.ResendEvery (a
// replica that restarts before its mounted Secret is the new one gets it
// too), while the old certificate is still good for a third of its life.
func (r *proxyRegistry) setTLS(cert, key []byte) {
	r.mu.Lock()
	r.tlsCert, r.tlsKey = cert, key
	ready := r.kc != nil
	if ready && r.quit == nil && !r.stopped {
		r.quit, r.done = make(chan struct{}), make(chan struct{})
		go r.resend(r.quit, r.done)
	}
	r.mu.Unlock()
	if !ready {
		return // no registration to send: nothing uses the port yet
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.send(ctx); err != nil {
		r.log.Warn("sending the egress proxy its renewed registration certificate; sent again within seconds", "namespace", r.kc.ns, "err", err)
	}
}

// unregister takes pod's registration back and sends the state.
func (r *proxyRegistry) unregister(pod string) {
	r.mu.Lock()
	delete(r.pods, pod)
	r.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.send(ctx)
	}()
}

// resend sends the state every egressproxy.ResendEvery until quit.
func (r *proxyRegistry) resend(quit, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-quit:
			return
		case <-time.After(egressproxy.ResendEvery):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := r.send(ctx)
		cancel()
		r.mu.Lock()
		warn := err != nil && !r.warned
		r.warned = err != nil
		r.mu.Unlock()
		if warn {
			r.log.Warn("sending the secrets' registrations to the egress proxy", "namespace", r.kc.ns, "err", err)
		}
	}
}

// stop ends the resending.
func (r *proxyRegistry) stop() {
	r.mu.Lock()
	quit, done := r.quit, r.done
	r.quit, r.stopped = nil, true
	r.mu.Unlock()
	if quit != nil {
		close(quit)
		<-done
	}
}

// send PUTs the state to every running proxy replica; it returns how
// many took it and the errors of the others.
func (r *proxyRegistry) send(ctx context.Context) (int, error) {
	r.push.Lock()
	defer r.push.Unlock()
	body, err := r.state()
	if err != nil {
		return 0, err
	}
	var pods corev1.PodList
	if err := r.kc.client.List(ctx, kube.Pods, r.kc.ns, kube.Selector(r.kc.gw.ID(), kube.RoleEgress), &pods); err != nil {
		return 0, err
	}
	name := kube.ProxyName(r.kc.gw.ID())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: r.pca.ClientTLS(name)},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	port := kube.ProxyRegistryPort
	if r.port != 0 {
		port = r.port
	}
	ok, seen := 0, map[string]bool{}
	var errs []error
	for _, p := range pods.Items {
		ip := p.Status.PodIP
		if !isProxyPod(&p) || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || ip == "" || seen[ip] {
			continue
		}
		seen[ip] = true
		u := "https://" + net.JoinHostPort(ip, strconv.Itoa(port)) + egressproxy.StatePath
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
		resp, err := client.Do(req)
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				err = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("proxy pod %s: %w", p.Name, err))
			continue
		}
		ok++
	}
	if ok == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no running proxy pod"))
	}
	return ok, errors.Join(errs...)
}

// state is the State as JSON: the CA, the gateway's own extra roots
// (SSL_CERT_FILE) for the intercepted upstreams, every registration.
func (r *proxyRegistry) state() ([]byte, error) {
	key, err := r.ica.KeyPEM()
	if err != nil {
		return nil, err
	}
	s := egressproxy.State{CACert: r.ica.CertPEM(), CAKey: key, Pods: []egressproxy.Registration{}}
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		if s.UpstreamRoots, err = os.ReadFile(f); err != nil {
			return nil, fmt.Errorf("reading SSL_CERT_FILE: %w", err)
		}
	}
	r.mu.Lock()
	for _, reg := range r.pods {
		s.Pods = append(s.Pods, reg)
	}
	s.TLSCert, s.TLSKey = r.tlsCert, r.tlsKey
	r.mu.Unlock()
	slices.SortFunc(s.Pods, func(a, b egressproxy.Registration) int { return strings.Compare(a.Pod, b.Pod) })
	return json.Marshal(s)
}
