package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/kube"
	"mcpbox/internal/launch"
	"mcpbox/internal/pkginstall"
	"mcpbox/internal/podagent"
	"mcpbox/internal/specconv"
)

// kubeSetup is what the kubernetes servers of one serve share: the pod
// CA (in the state dir, so a restarted gateway trusts the same pods'
// certificates it issued) and, per cluster and namespace, a client and
// this gateway's registration (owner object and lease).
type kubeSetup struct {
	base     string // the config's dir, for a relative kubeconfig
	stateDir string
	log      *slog.Logger

	mu    sync.Mutex
	ca    *podagent.CA         // guarded by mu
	conns map[string]*kubeConn // guarded by mu; by kubeconfig and namespace
}

// kubeConn is one cluster and namespace this gateway has pods in.
type kubeConn struct {
	client *kube.Client
	gw     *kube.Gateway
	ns     string
	key    string        // kubeConnKey
	log    *slog.Logger  // the gateway's; nil: none
	egress kubeEgress    // the pods' egress proxy, made at first need
	audit  egressAudit   // its decisions into the audit
	inject proxyRegistry // the secrets its replicas add for the pods
}

// logger is kc's log, or one that discards.
func (kc *kubeConn) logger() *slog.Logger {
	if kc.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return kc.log
}

// kubeConnKey names a backend's cluster and namespace.
func kubeConnKey(b config.Backend) string {
	return b.Kubeconfig + "\x00" + fmt.Sprint(b.InCluster) + "\x00" + b.Namespace
}

func newKubeSetup(base, stateDir string, log *slog.Logger) *kubeSetup {
	return &kubeSetup{base: base, stateDir: stateDir, log: log, conns: map[string]*kubeConn{}}
}

// conn returns the client and registration for b, made at first use:
// before registering, the owner objects of gateways whose lease expired
// (crashed ones) are deleted, and with them everything they made.
func (k *kubeSetup) conn(ctx context.Context, b config.Backend) (*kubeConn, error) {
	key := kubeConnKey(b)
	k.mu.Lock()
	defer k.mu.Unlock()
	if kc, ok := k.conns[key]; ok {
		return kc, nil
	}
	var cfg kube.Config
	var err error
	if b.InCluster {
		cfg, err = kube.InCluster()
	} else {
		cfg, err = kube.LoadKubeconfig(specconv.Resolve(k.base, b.Kubeconfig))
	}
	if err != nil {
		return nil, err
	}
	c, err := kube.New(cfg)
	if err != nil {
		return nil, err
	}
	gone, err := kube.CollectExpired(ctx, c, b.Namespace, time.Now())
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("kubernetes namespace %s: collecting the objects of dead gateways: %w", b.Namespace, err)
	}
	for _, id := range gone {
		k.log.Info("deleted the objects of a gateway whose lease expired", "namespace", b.Namespace, "gateway", id)
	}
	idb := make([]byte, 4)
	_, _ = rand.Read(idb)
	gw, err := kube.Register(ctx, c, b.Namespace, hex.EncodeToString(idb), 0, func(msg string, err error) {
		if err != nil {
			k.log.Warn(msg, "namespace", b.Namespace, "err", err)
		} else {
			k.log.Info(msg, "namespace", b.Namespace)
		}
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	kc := &kubeConn{client: c, gw: gw, ns: b.Namespace, key: key, log: k.log}
	k.conns[key] = kc
	return kc, nil
}

// podCA is the gateway's pod CA, loaded or made at first use.
func (k *kubeSetup) podCA() (*podagent.CA, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ca == nil {
		ca, err := podagent.LoadOrCreateCA(filepath.Join(k.stateDir, "kube-ca"))
		if err != nil {
			return nil, fmt.Errorf("the pod CA: %w", err)
		}
		k.ca = ca
	}
	return k.ca, nil
}

// close deletes every registration's owner object (the garbage collector
// then deletes every object of this gateway); the gateway has stopped
// its pods already.
func (k *kubeSetup) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kc := range k.conns {
		kc.egress.stopRenewal()
		kc.inject.stop()
		kc.audit.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := kc.gw.Close(ctx); err != nil {
			k.log.Warn("deleting this gateway's kubernetes objects", "namespace", kc.ns, "err", err)
		}
		cancel()
		kc.client.Close()
	}
	k.conns = map[string]*kubeConn{}
}

// kube launches gs as pods of the kubernetes backend.
func (w wiring) kube(gs *gateway.Server, s *config.Server) error {
	if w.kubes == nil {
		return fmt.Errorf("server %s: the kubernetes backend runs with serve only", s.Name)
	}
	ctx := w.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// Registering in the cluster is bounded; the pods' starts have their
	// own bound.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b := w.c.BackendOf(s)
	kc, err := w.kubes.conn(ctx, b)
	if err != nil {
		return fmt.Errorf("server %s: %w", s.Name, err)
	}
	ca, err := w.kubes.podCA()
	if err != nil {
		return err
	}
	ko := launch.KubeOptions{
		Name: s.Name, Client: kc.client, Namespace: kc.ns, Gateway: kc.gw,
		Pod: specconv.KubePod(w.c, s), StorageClass: b.StorageClass, Secrets: s.Secrets, GatewayCIDRs: b.GatewayCIDRs,
		Book: w.book, Log: w.log, Stderr: w.stderr,
		Issue: func(pod string) ([]byte, []byte, []byte, error) {
			cert, key, err := ca.IssuePod(pod)
			return cert, key, ca.CAPEM(), err
		},
		Connect: func(ctx context.Context, addr, pod string, env map[string]string, files map[string][]byte) (mcp.Connection, error) {
			start := podagent.StartRequest{Env: env, Files: files}
			var o podagent.ConnectOptions
			if len(s.Network.Egress) > 0 {
				// The agent fronts the proxy for the server: the
				// server's requests leave with a token it never
				// holds, renewed while the pod runs.
				kc.egress.waitReady(ctx, kc, w.log)
				var err error
				if start.Proxy, o.Renew, err = kc.egress.agentProxy(pod, s.Name, w.log); err != nil {
					return nil, fmt.Errorf("the egress proxy: %w", err)
				}
			}
			return podagent.ConnectWith(ctx, addr, pod, ca, start, o)
		},
	}
	startJob := func(ctx context.Context, addr, pod string, env map[string]string, files map[string][]byte) error {
		return podagent.StartJob(ctx, addr, pod, ca, podagent.StartRequest{Env: env, Files: files})
	}
	if s.Package != "" {
		if err := w.kubeInstall(&ko, kc, s); err != nil {
			return err
		}
	}
	if len(s.Network.Egress) > 0 || kc.egress.made() || ko.Install != nil {
		// Also without egress once the proxy exists: a reload that took
		// a server's allowlist away rewrites the proxy's config.
		if err := kc.egress.ensure(ctx, kc, w.c, s, ca); err != nil {
			return fmt.Errorf("server %s: %w", s.Name, err)
		}
	}
	if len(s.Network.Egress) > 0 {
		// Its pods may reach the proxy; Connect gives their agents
		// what they need.
		ko.Proxy = true
	}
	if len(injectHosts(s)) > 0 && ko.Proxy && w.ca != nil {
		if !kc.egress.hasRegistry() {
			// Made (for the config before a reload) without the
			// registration port.
			return fmt.Errorf("server %s: secrets added at the proxy need the egress proxy's registration port, which this gateway's proxy in namespace %s was made without: restart the gateway", s.Name, kc.ns)
		}
		kc.inject.setup(kc, ca, w.ca, w.log)
		ko.Inject = kc.inject.inject(s.Name)
	}
	if ko.Install != nil {
		// The install reaches the registry through the proxy: the
		// pod's policy lets it reach the proxy, which lets the server
		// (no token of its own without network.egress) reach nothing.
		ko.Proxy = true
		ko.Install.StartJob = startJob
		ko.Install.Env = func(ctx context.Context, pod string) (map[string]string, error) {
			kc.egress.waitReady(ctx, kc, w.log)
			env, err := kc.egress.envTTL(w.book, pod, installServer(s.Name), installTokenTTL)
			if err == nil && ko.Install.Files != nil {
				env["npm_config_userconfig"] = kube.InstallSecretsDir + "/npmrc"
			}
			return env, err
		}
	}
	if w.guard != nil {
		ko.Observer = w.guard
	}
	l, err := launch.NewKube(ko)
	if err != nil {
		return err
	}
	if ko.Proxy && w.guard != nil {
		kc.audit.add(kc, s.Name, l, w.log)
	}
	gs.Launch = launch.On(l)
	gs.Release = l.Release
	// The pod's start (an image pulled) has its own bound; the server's
	// initialize then gets the minute a local sandbox's start has.
	gs.StartTimeout = l.StartTimeout() + time.Minute
	return nil
}

// installTokenTTL bounds an install's proxy token: the install runs
// within the pod's start.
const installTokenTTL = 10 * time.Minute

// kubeInstall sets up server s's package install in its pods: the pod
// runs on the base image, its init container installs the pinned
// lockfile (from the package installed on this host and pinned in
// mcpbox.lock) with egress only to the lockfile's registries.
func (w wiring) kubeInstall(ko *launch.KubeOptions, kc *kubeConn, s *config.Server) error {
	pk, ok := w.opts.Packages[s.Name]
	if !ok {
		return fmt.Errorf("server %s: package %s is not installed", s.Name, s.Package)
	}
	po, err := specconv.KubePackagePod(w.c, s, pk)
	if err != nil {
		return err
	}
	pj, err := os.ReadFile(filepath.Join(pk.Dir, "package.json"))
	if err != nil {
		return fmt.Errorf("server %s: %w", s.Name, err)
	}
	lock, err := os.ReadFile(filepath.Join(pk.Dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("server %s: the pinned lockfile: %w", s.Name, err)
	}
	npm, err := pkginstall.LoadNPMConfig(os.Getenv, w.opts.Base)
	if err != nil {
		return fmt.Errorf("server %s: reading the npm configuration: %w", s.Name, err)
	}
	rules, err := npm.LockfileRegistryRules(lock)
	if err != nil {
		return fmt.Errorf("server %s: %w", s.Name, err)
	}
	// The registries' credentials go to the install over its agent's
	// channel (a file in its memory-backed dir), never into the pod's
	// spec; the book learns them.
	rc, creds, err := npm.LockfileNPMRC(lock)
	if err != nil {
		return fmt.Errorf("server %s: %w", s.Name, err)
	}
	for i, v := range creds {
		if w.book == nil {
			break
		}
		if err := w.book.Add(fmt.Sprintf("npm registry credential %d of %s", i, s.Name), []byte(v)); err != nil {
			return fmt.Errorf("server %s: %w", s.Name, err)
		}
	}
	kc.egress.addInstall(s.Name, rules)
	ko.Pod = po
	ko.Install = &launch.KubeInstall{Package: s.Package, PackageJSON: pj, Lockfile: lock}
	if rc != nil {
		ko.Install.Files = map[string][]byte{"npmrc": rc}
	}
	return nil
}

// KubeDoctor checks each cluster and namespace c's servers run pods in
// (the top-level kubernetes backend, and every server's backend of kind
// kubernetes; each distinct kubeconfig and namespace once): API access,
// the RBAC Role of `mcpbox kube rbac --config`, the Secrets its servers'
// kubernetes: references read there, the NetworkPolicy API, the runtime
// classes, where the pods get the agent (kube.AgentCheck). base is the
// config's dir. It prints one line per check on w (under a line naming
// the namespace when there are several) and reports whether all passed.
func KubeDoctor(ctx context.Context, c *config.Config, base string, w io.Writer) (bool, error) {
	groups := kubeBackends(c)
	if len(groups) == 0 {
		return false, fmt.Errorf("the config has no backend of kind kubernetes")
	}
	ok := true
	for _, g := range groups {
		if len(groups) > 1 {
			where := "in cluster"
			if !g[0].InCluster {
				where = "kubeconfig " + g[0].Kubeconfig
			}
			fmt.Fprintf(w, "namespace %s (%s):\n", g[0].Namespace, where)
		}
		for _, ch := range kubeDoctorChecks(ctx, c, base, g) {
			status := "ok"
			if !ch.OK {
				status, ok = "FAILED", false
			}
			fmt.Fprintf(w, "%-14s %-7s %s\n", ch.Name, status, ch.Detail)
		}
	}
	return ok, nil
}

// kubeDoctorChecks are the checks of one cluster and namespace, whose
// backends are bs (same kubeconfig and namespace): kube.Doctor once,
// then each other runtime class and each agent setting of bs.
func kubeDoctorChecks(ctx context.Context, c *config.Config, base string, bs []config.Backend) []kube.Check {
	b := bs[0]
	var cfg kube.Config
	var err error
	if b.InCluster {
		cfg, err = kube.InCluster()
	} else {
		cfg, err = kube.LoadKubeconfig(specconv.Resolve(base, b.Kubeconfig))
	}
	if err != nil {
		return []kube.Check{{Name: "api", Detail: err.Error()}}
	}
	cl, err := kube.New(cfg)
	if err != nil {
		return []kube.Check{{Name: "api", Detail: err.Error()}}
	}
	defer cl.Close()
	var refs []kube.SecretKeyRef
	for _, r := range c.KubeSecretRefs(b.Namespace) {
		refs = append(refs, kube.SecretKeyRef{Name: r.Secret, Key: r.Key})
	}
	checks := kube.Doctor(ctx, cl, b.Namespace, b.RuntimeClass, refs)
	noAPI := len(checks) == 1 && !checks[0].OK
	classes := map[string]bool{b.RuntimeClass: true}
	agents := map[kube.Check]bool{}
	for _, o := range bs {
		if o.RuntimeClass != "" && !classes[o.RuntimeClass] && !noAPI {
			classes[o.RuntimeClass] = true
			checks = append(checks, kube.RuntimeClassCheck(ctx, cl, o.RuntimeClass))
		}
		if a := kube.AgentCheck(o.AgentImage, o.AgentPath, config.DefaultAgentPath); !agents[a] {
			agents[a] = true
			checks = append(checks, a)
		}
	}
	return checks
}

// kubeBackends are the kubernetes backends of c that doctor checks,
// grouped by cluster and namespace (kubeConnKey), in the config's order:
// the top-level one, then each server's that runs pods.
func kubeBackends(c *config.Config) [][]config.Backend {
	var out [][]config.Backend
	at := map[string]int{}
	add := func(b config.Backend) {
		if b.Kind != config.BackendKubernetes {
			return
		}
		k := kubeConnKey(b)
		if i, ok := at[k]; ok {
			out[i] = append(out[i], b)
			return
		}
		at[k] = len(out)
		out = append(out, []config.Backend{b})
	}
	add(c.Backend)
	for _, s := range c.Servers {
		if s.URL == "" {
			add(c.BackendOf(s))
		}
	}
	return out
}
