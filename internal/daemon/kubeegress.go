package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/kube"
	"mcpbox/internal/kube/egressproxy"
	"mcpbox/internal/podagent"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
)

// proxyTokenTTL is how long a pod's egress proxy token is good for. The
// token never reaches the server: the pod's agent holds it and adds it
// to the server's requests (podagent.Proxy), and the gateway sends the
// agent a new one every third of a token's life over the agent's
// mutual-TLS channel (podagent.Renewal), so a pod that runs longer keeps
// its egress, and a token taken from a pod is good for an hour at most.
const proxyTokenTTL = time.Hour

// testProxyTokenTTL, set at link time by the end-to-end tests
// (-ldflags -X mcpbox/internal/daemon.testProxyTokenTTL=6s), shortens
// proxyTokenTTL to a duration of at least a second; a release build
// leaves it empty.
var testProxyTokenTTL string

// proxyCertTTL is the validity of the proxy's registration certificate.
// The proxy lives as long as its gateway, so the gateway renews it when
// a third of it is left (renewTLS): a gateway that ran past it would
// otherwise fail every registration (and the pods' credential hosts be
// refused).
const proxyCertTTL = 90 * 24 * time.Hour

// kubeEgress is this gateway's egress proxy in one namespace: its token
// key, the config in its Secret, and the Service's address the pods use.
type kubeEgress struct {
	mu    sync.Mutex
	key   []byte // nil until the proxy is made
	cfg   []byte // the Secret's config as last written
	addr  string // the Service's cluster IP and port
	ready bool   // a proxy pod was seen available
	// registry: the proxy serves its registration port (a server of the
	// config it was made for adds secrets at the proxy).
	registry bool
	// installs are the registry allowlists of package servers' installs,
	// by server (installServer names them in the proxy's config).
	installs map[string][]egress.Rule
	// certTTL is the registration certificate's lifetime; zero:
	// proxyCertTTL (tests shorten it).
	certTTL time.Duration
	// tokenTTL is the pods' tokens' lifetime; zero: proxyTokenTTL
	// (tests shorten it).
	tokenTTL time.Duration
	// renewQuit ends the certificate's renewal (renewTLS); nil: none.
	renewQuit, renewDone chan struct{}
}

// installServer is the proxy's name of server's package install: its
// tokens open the registry only, never the server's own allowlist.
func installServer(server string) string { return server + "#install" }

// addInstall sets server's install allowlist (before ensure writes the
// proxy's config).
func (e *kubeEgress) addInstall(server string, rules []egress.Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.installs == nil {
		e.installs = map[string][]egress.Rule{}
	}
	e.installs[server] = rules
}

// proxyReadyWait bounds how long a pod's start waits for the first proxy
// pod; after it the pod starts anyway (its requests fail until the proxy
// serves), so a proxy that cannot start does not stop the server.
const proxyReadyWait = 30 * time.Second

// waitReady waits, until one of the proxy's pods is available, before
// the first pod with egress starts: else that pod's first requests would
// find nothing listening. Once seen, it never waits again.
func (e *kubeEgress) waitReady(ctx context.Context, kc *kubeConn, log *slog.Logger) {
	e.mu.Lock()
	ready := e.ready || e.key == nil
	e.mu.Unlock()
	if ready {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, proxyReadyWait)
	defer cancel()
	for {
		var d appsv1.Deployment
		err := kc.client.Get(ctx, kube.Deployments, kc.ns, kube.ProxyName(kc.gw.ID()), &d)
		if err == nil && d.Status.AvailableReplicas > 0 {
			e.mu.Lock()
			e.ready = true
			e.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			if log != nil {
				log.Warn("the egress proxy has no available pod yet; starting the server's pod anyway", "namespace", kc.ns)
			}
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// hasRegistry reports whether the proxy serves its registration port.
func (e *kubeEgress) hasRegistry() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.registry
}

// made reports whether the proxy exists (ensure made it).
func (e *kubeEgress) made() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.key != nil
}

// egressServers are c's servers that run in kc's namespace (by connKey)
// with an egress allowlist, as the proxy's config holds them.
func egressServers(c *config.Config, connKey string) (map[string]egressproxy.ServerPolicy, error) {
	out := map[string]egressproxy.ServerPolicy{}
	for _, s := range c.Servers {
		if !c.IsKubernetes(s) || len(s.Network.Egress) == 0 || kubeConnKey(c.BackendOf(s)) != connKey {
			continue
		}
		rules, limits, err := specconv.EgressPolicy(s)
		if err != nil {
			return nil, err
		}
		out[s.Name] = egressproxy.ServerPolicy{Rules: rules, Limits: limits, Inject: injectHosts(s)}
	}
	return out, nil
}

// injectHosts are the hosts of s's secrets added at the proxy (no
// values): the proxy refuses them to a pod it has no registration of.
func injectHosts(s *config.Server) []string {
	var out []string
	for _, sec := range s.Secrets {
		if sec.Inject != nil {
			out = append(out, sec.Inject.Hosts...)
		}
	}
	return out
}

// proxyServers are the proxy's policies: the servers' allowlists
// (egressServers) and the package installs' (installServer), of the
// servers of c in connKey's namespace. e.mu is held.
func (e *kubeEgress) proxyServers(c *config.Config, connKey string) (map[string]egressproxy.ServerPolicy, error) {
	servers, err := egressServers(c, connKey)
	if err != nil {
		return nil, err
	}
	for name, rules := range e.installs {
		if s := c.Server(name); s != nil && c.IsKubernetes(s) && s.Package != "" && kubeConnKey(c.BackendOf(s)) == connKey {
			servers[installServer(name)] = egressproxy.ServerPolicy{Rules: rules}
		}
	}
	return servers, nil
}

// ensure makes the proxy at first need (its Secret, ingress policy,
// Service and Deployment, all owned by the gateway's owner object) and
// rewrites its Secret when the allowlists changed (the proxy reads it
// again). The gateway's Role may create and delete Secrets but not
// update them (an update could rewrite another workload's Secret), so a
// change is a delete and a create: the pods keep the mounted old config
// in between.
func (e *kubeEgress) ensure(ctx context.Context, kc *kubeConn, c *config.Config, s *config.Server, pca *podagent.CA) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	servers, err := e.proxyServers(c, kc.key)
	if err != nil {
		return err
	}
	first := e.key == nil
	if first {
		if e.key, err = egressproxy.NewKey(); err != nil {
			return err
		}
	}
	cfg, err := json.Marshal(egressproxy.Config{Key: e.key, Servers: servers})
	if err != nil {
		return fmt.Errorf("the egress proxy's config: %w", err)
	}
	if !first && string(cfg) == string(e.cfg) {
		return nil
	}
	gw, owner, ns, cl := kc.gw.ID(), kc.gw.Ref(), kc.ns, kc.client
	name := kube.ProxyName(gw)
	err = cl.Create(ctx, kube.Secrets, ns, kube.ProxySecret(gw, owner, cfg), nil)
	if kube.IsAlreadyExists(err) {
		// A change, or a first start that failed after the Secret.
		if err = cl.Delete(ctx, kube.Secrets, ns, name); err == nil || kube.IsNotFound(err) {
			err = cl.Create(ctx, kube.Secrets, ns, kube.ProxySecret(gw, owner, cfg), nil)
		}
	}
	if err != nil {
		return fmt.Errorf("the egress proxy's config: %w", err)
	}
	e.cfg = cfg
	if !first {
		return nil
	}
	if err := e.create(ctx, kc, c, s, pca); err != nil {
		e.key, e.registry = nil, false // try again at the next start
		return err
	}
	return nil
}

// create makes the proxy's policy, TLS Secret, Service and Deployment;
// the image is the first egress server's agent_image (the proxy is mcpbox
// alone), else its pod's image, which then has mcpbox at agent_path. The
// TLS Secret is the proxy's certificate for its registration port, from
// the pod CA pca (the pods' agents' CA), which the gateway's client
// certificate comes from too.
func (e *kubeEgress) create(ctx context.Context, kc *kubeConn, c *config.Config, s *config.Server, pca *podagent.CA) error {
	gw, owner, ns, cl := kc.gw.ID(), kc.gw.Ref(), kc.ns, kc.client
	b := c.BackendOf(s)
	agent := b.AgentPath
	if agent == "" {
		agent = config.DefaultAgentPath
	}
	img := b.AgentImage
	switch {
	case img != "":
	case s.Package != "":
		// A package server's pod runs on its base image, which has
		// the agent too.
		eco, _, _ := strings.Cut(s.Package, ":")
		img = b.BaseImage(eco)
	default:
		img = specconv.KubePod(c, s).Image
	}
	po := kube.ProxyOptions{Gateway: gw, Owner: owner, Image: img,
		Command: kube.ProxyCommand(agent), ConfigSecret: kube.ProxyName(gw), ImagePullSecrets: b.ImagePullSecrets,
		Limits: kube.Limits{CPU: 1, Memory: 256 << 20, EphemeralStorage: 128 << 20}}
	// The registration port only where a server adds secrets at the
	// proxy: no endpoint that nothing needs.
	var registryFrom []networkingv1.NetworkPolicyPeer
	servers, err := egressServers(c, kc.key)
	if err != nil {
		return err
	}
	for _, sp := range servers {
		e.registry = e.registry || len(sp.Inject) > 0
	}
	if e.registry {
		po.TLSSecret, registryFrom = kube.ProxyTLSName(gw), kube.GatewayPeers(b.GatewayCIDRs)
		_, _, renewAt, err := e.issueTLS(ctx, kc, pca)
		if err != nil {
			return err
		}
		e.startRenewal(kc, pca, renewAt)
	}
	if err := cl.Create(ctx, kube.NetworkPolicies, ns, kube.ProxyNetworkPolicy(gw, owner, registryFrom), nil); err != nil && !kube.IsAlreadyExists(err) {
		return fmt.Errorf("the egress proxy's network policy: %w", err)
	}
	var svc corev1.Service
	err = cl.Create(ctx, kube.Services, ns, kube.ProxyService(po), &svc)
	if kube.IsAlreadyExists(err) {
		err = cl.Get(ctx, kube.Services, ns, kube.ProxyName(gw), &svc)
	}
	if err != nil {
		return fmt.Errorf("the egress proxy's service: %w", err)
	}
	if ip := svc.Spec.ClusterIP; ip == "" || ip == corev1.ClusterIPNone {
		return fmt.Errorf("the egress proxy's service has no cluster IP")
	}
	if err := cl.Create(ctx, kube.Deployments, ns, kube.ProxyDeployment(po), nil); err != nil && !kube.IsAlreadyExists(err) {
		return fmt.Errorf("the egress proxy's deployment: %w", err)
	}
	e.addr = net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(kube.ProxyPort))
	return nil
}

// tokenLife is how long a pod's token is good for.
func (e *kubeEgress) tokenLife() time.Duration {
	e.mu.Lock()
	ttl := e.tokenTTL
	e.mu.Unlock()
	if ttl > 0 {
		return ttl
	}
	if d, err := time.ParseDuration(testProxyTokenTTL); err == nil && d >= time.Second && d < proxyTokenTTL {
		return d
	}
	return proxyTokenTTL
}

// agentProxy is what pod's agent needs to front the proxy for server's
// server (its address and a first token), and how its connection renews
// the token: a new one every third of a token's life, after a failure
// again within a twentieth (at most a minute), each failure logged. The
// tokens reach the agent only, never the server, so the book need not
// learn them.
func (e *kubeEgress) agentProxy(pod, server string, log *slog.Logger) (*podagent.Proxy, *podagent.Renewal, error) {
	ttl := e.tokenLife()
	sign := func() (string, error) {
		e.mu.Lock()
		key := e.key
		e.mu.Unlock()
		if key == nil {
			return "", fmt.Errorf("the egress proxy is not set up")
		}
		return egressproxy.Sign(key, pod, server, time.Now().Add(ttl)), nil
	}
	tok, err := sign()
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	addr := e.addr
	e.mu.Unlock()
	r := &podagent.Renewal{Every: ttl / 3, Retry: max(time.Second, min(time.Minute, ttl/20)), Token: sign,
		Failed: func(err error) {
			if log != nil {
				log.Warn("renewing a pod's egress proxy token", "server", server, "pod", pod, "err", err)
			}
		}}
	return &podagent.Proxy{Addr: addr, User: pod, Token: tok}, r, nil
}

// envTTL returns pod's proxy environment for server (a run-once job's:
// a package install), with a token good for ttl taught to book so that
// the job's output is redacted of it.
func (e *kubeEgress) envTTL(book *redact.Book, pod, server string, ttl time.Duration) (map[string]string, error) {
	e.mu.Lock()
	key, addr := e.key, e.addr
	e.mu.Unlock()
	if key == nil {
		return nil, fmt.Errorf("the egress proxy is not set up")
	}
	tok := egressproxy.Sign(key, pod, server, time.Now().Add(ttl))
	if book != nil {
		if err := book.Add("egress proxy token of "+pod, []byte(tok)); err != nil {
			return nil, err
		}
	}
	return egressproxy.ProxyEnv(addr, pod, tok), nil
}

// issueTLS issues the proxy's registration certificate, valid for
// certTTL, into its TLS Secret (ProxyTLS), which a replica mounts when
// it starts. A Secret that exists (a first start that failed after it,
// or the certificate being renewed) is replaced, never reused: the
// gateway's Role cannot read it, and the certificate the gateway knows
// is the one whose renewal it schedules. It returns the certificate,
// its key and when to renew it (two thirds into its life).
func (e *kubeEgress) issueTLS(ctx context.Context, kc *kubeConn, pca *podagent.CA) (cert, key []byte, renewAt time.Time, err error) {
	ttl := e.certTTL
	if ttl == 0 {
		ttl = proxyCertTTL
	}
	gw, owner, ns, cl := kc.gw.ID(), kc.gw.Ref(), kc.ns, kc.client
	issued := time.Now()
	if cert, key, err = pca.IssuePodTTL(kube.ProxyName(gw), ttl); err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("the egress proxy's certificate: %w", err)
	}
	sec := kube.ProxyTLS(gw, owner, cert, key, pca.CAPEM())
	err = cl.Create(ctx, kube.Secrets, ns, sec, nil)
	if kube.IsAlreadyExists(err) {
		// The Role may delete and create Secrets, not update them: a
		// replica that starts in between waits for the new one.
		if err = cl.Delete(ctx, kube.Secrets, ns, sec.Name); err == nil || kube.IsNotFound(err) {
			err = cl.Create(ctx, kube.Secrets, ns, sec, nil)
		}
	}
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("the egress proxy's certificate: %w", err)
	}
	return cert, key, issued.Add(ttl * 2 / 3), nil
}

// startRenewal renews the registration certificate at renewAt, and each
// renewed one two thirds into its life, until stopRenewal: a new
// certificate into the TLS Secret (for replicas that start later), then
// to the running replicas in the registry's State (proxyRegistry.setTLS),
// which serve it from their next handshake; the registrations stay. A
// failed renewal is logged and tried again soon: the current certificate
// still has a third of its life. e.mu is held.
func (e *kubeEgress) startRenewal(kc *kubeConn, pca *podagent.CA, renewAt time.Time) {
	if e.renewQuit != nil {
		return
	}
	quit, done := make(chan struct{}), make(chan struct{})
	e.renewQuit, e.renewDone = quit, done
	ttl := e.certTTL
	if ttl == 0 {
		ttl = proxyCertTTL
	}
	retry := min(time.Minute, ttl/20)
	go func() {
		defer close(done)
		at := renewAt
		for {
			t := time.NewTimer(time.Until(at))
			select {
			case <-quit:
				t.Stop()
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cert, key, next, err := e.issueTLS(ctx, kc, pca)
			cancel()
			if err != nil {
				kc.logger().Warn("renewing the egress proxy's registration certificate", "namespace", kc.ns, "err", err)
				at = time.Now().Add(retry)
				continue
			}
			kc.inject.setTLS(cert, key)
			at = next
		}
	}()
}

// stopRenewal ends startRenewal's renewals.
func (e *kubeEgress) stopRenewal() {
	e.mu.Lock()
	quit, done := e.renewQuit, e.renewDone
	e.renewQuit = nil
	e.mu.Unlock()
	if quit != nil {
		close(quit)
		<-done
	}
}
