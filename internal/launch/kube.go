package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/kube"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/secrets"
	"mcpbox/internal/track"
)

// KubeOptions configure a Kube backend. Client, Gateway, Pod.Image,
// Pod.Command, Issue and Connect are required.
type KubeOptions struct {
	// Name is the server's name.
	Name string
	// Client and Namespace are where the pods go; Gateway is this
	// gateway's owner object and lease (kube.Register).
	Client    *kube.Client
	Namespace string
	Gateway   *kube.Gateway
	// Pod is the template of the server's pods: image, command (the
	// agent's, kube.AgentCommand), environment, limits, volumes and
	// scheduling. Name, Gateway, Server, Scope, Owner, TLSSecret and
	// OutputClaim are set per start.
	Pod kube.PodOptions
	// Proxy: the server's pods may reach the gateway's egress proxy (the
	// server has an egress allowlist).
	Proxy bool
	// ProxyEnv, with Proxy, is a pod's egress proxy environment
	// (egressproxy.ProxyEnv: the proxy's address and the pod's token),
	// sent to its agent with the secrets at start, never in the pod's
	// spec. It is called once per pod, with the start's context and the
	// pod's name. Nil: none; the gateway leaves it nil, its Connect
	// having the agent front the proxy for the server (podagent.Proxy),
	// so that the token, renewed while the pod runs, never reaches the
	// server.
	ProxyEnv func(ctx context.Context, pod string) (map[string]string, error)
	// GatewayCIDRs, if set, are the addresses the NetworkPolicy admits
	// the gateway from; nil: pods labelled mcpbox.dev/role=gateway.
	GatewayCIDRs []string
	// StorageClass, if set and Pod.Output is, makes each agent's output a
	// PersistentVolumeClaim of that class ("default": the cluster's
	// default class), kept when the pod goes (idle, stop, the gateway's
	// end) like a local workspace; else the output is an emptyDir that
	// goes with the pod.
	StorageClass string
	// Secrets are resolved at each start and sent to the pod's agent over
	// its mutual-TLS channel, never through the API (etcd); a kubernetes:
	// reference is read from its Secret in Namespace with Client.
	Secrets []config.Secret
	// Inject, with Proxy, serves the secrets added at the egress proxy
	// (secrets.NAME.inject); nil: such a secret is refused.
	Inject *KubeInject
	// Issue returns a certificate and key for the pod name and the CA's
	// certificate (podagent.CA).
	Issue func(pod string) (certPEM, keyPEM, caPEM []byte, err error)
	// Connect connects to the pod's agent at addr over mutual TLS, sends
	// it env and files, and returns the server's connection
	// (podagent.Connect).
	Connect func(ctx context.Context, addr, pod string, env map[string]string, files map[string][]byte) (mcp.Connection, error)
	// StartTimeout bounds a start (the pod scheduled, pulled, running,
	// the agent reached); zero: 2 minutes.
	StartTimeout time.Duration
	// Book learns every secret value before the pod is made; nil: one of
	// the backend's own.
	Book *redact.Book
	// Observer, if set, is told of each pod's life (the audit).
	Observer Observer
	// Log is the gateway's log; nil: nothing is logged.
	Log *slog.Logger
	// Install, if set, installs the server's package in each pod before
	// it runs (Pod.Install's ConfigMap is set per start).
	Install *KubeInstall
	// Stderr, if set, gets each pod's log (its server's stderr, which the
	// agent redacted, and the agent's own lines), followed through the
	// API, line-prefixed with the server's name and redacted again, as a
	// local sandbox's stderr is.
	Stderr io.Writer
}

// Kube runs each scope's instance of a server as a pod of a Kubernetes
// cluster, behind a NetworkPolicy of the server, reached through the
// mcpbox agent in the pod over mutual TLS.
type Kube struct {
	o   KubeOptions
	log *slog.Logger

	policyOnce sync.Once
	policyErr  error

	logDenied sync.Once // the warning that the Role lacks pods/log

	live liveSet

	podsMu sync.Mutex
	byPod  map[string]*kubeInstance // guarded by podsMu; started pods, kept a while after they stop
}

// egressLate is how long after its stop a pod's egress decisions are
// still audited: the proxy's log reaches the gateway after the fact.
const egressLate = time.Minute

var _ Backend = (*Kube)(nil)

// NewKube returns the Kubernetes backend of one server.
func NewKube(o KubeOptions) (*Kube, error) {
	switch {
	case o.Client == nil || o.Gateway == nil:
		return nil, errors.New("kubernetes backend: no client or gateway")
	case o.Pod.Image == "":
		return nil, fmt.Errorf("server %s: the kubernetes backend needs an image (image: or backend.image)", o.Name)
	case o.Issue == nil || o.Connect == nil:
		return nil, errors.New("kubernetes backend: no certificate issuer or agent connector")
	case (o.Install == nil) != (o.Pod.Install == nil) || o.Install != nil && o.Install.StartJob == nil:
		return nil, fmt.Errorf("server %s: the kubernetes backend: an install needs its pod's init container and a job starter", o.Name)
	}
	for _, s := range o.Secrets {
		if s.Inject != nil && (o.Inject == nil || !o.Proxy) {
			return nil, fmt.Errorf("server %s: secret %s: inject (secrets added at the egress proxy) needs the egress proxy (network.egress)", o.Name, s.Name)
		}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.Book == nil {
		o.Book = &redact.Book{}
	}
	k := &Kube{o: o, log: o.Log}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	return k, nil
}

// StartTimeout is what bounds a pod's start (KubeOptions.StartTimeout).
func (k *Kube) StartTimeout() time.Duration { return k.o.StartTimeout }

func (k *Kube) obs() Observer {
	if k.o.Observer == nil {
		return noObserver{}
	}
	return k.o.Observer
}

// kubeInstance is one pod of the server.
type kubeInstance struct {
	k     *Kube
	scope gateway.Scope
	pod   string
	tls   string
	rec   *track.Sandbox
	conn  mcp.Connection

	untrack    func()
	stopStderr func() // ends followStderr's follow; nil: none
	registered bool   // its secrets added at the proxy are registered
	once       sync.Once
	ended      chan struct{}
	status     string // written before ended closes
	// expected: the pod was running (or exited 0) when it was stopped,
	// so its end is a stop, not a crash (for the audit); written before
	// ended closes.
	expected bool
	// exited0: its server exited with status 0 (Process.Clean, which the
	// gateway asks only of an end it did not cause); written before
	// ended closes.
	exited0 bool
}

// Start makes the scope's pod and connects to its agent: the server's
// NetworkPolicy (once per backend), the workspace claim, the pod's TLS
// Secret, the pod; then it waits until the pod runs and has an IP, and
// hands the agent the server's secrets. A failed start deletes what it
// made.
func (k *Kube) Start(ctx context.Context, scope gateway.Scope) (_ Instance, err error) {
	if err := k.o.Gateway.Err(); err != nil {
		return nil, err // its objects are gone: nothing starts until serve does
	}
	ctx, cancel := context.WithTimeout(ctx, k.o.StartTimeout)
	defer cancel()
	env, files, proxied, err := k.resolveSecrets(ctx)
	if err != nil {
		return nil, err
	}
	if err := k.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	in := &kubeInstance{k: k, scope: scope, rec: track.NewSandbox(), ended: make(chan struct{})}
	hash := kube.ScopeHash(scopeKey(scope))
	in.pod = "mcpbox-" + kube.LabelValue(k.o.Name, 30) + "-" + hash[:8] + "-" + randHex(3)
	in.tls = in.pod + "-tls"
	defer func() {
		if err != nil {
			in.deleteObjects(context.WithoutCancel(ctx))
		}
	}()
	po := k.o.Pod
	po.Name, po.Gateway, po.Server, po.Scope = in.pod, k.o.Gateway.ID(), k.o.Name, hash
	po.Owner, po.TLSSecret = k.o.Gateway.Ref(), in.tls
	if po.Output && k.o.StorageClass != "" {
		if po.OutputClaim, err = k.ensureClaim(ctx, scope, hash); err != nil {
			return nil, err
		}
		in.rec.Workspace = po.OutputClaim
	}
	if k.o.Proxy && k.o.ProxyEnv != nil {
		penv, err := k.o.ProxyEnv(ctx, in.pod)
		if err != nil {
			return nil, fmt.Errorf("server %s: the egress proxy: %w", k.o.Name, err)
		}
		maps.Copy(env, penv) // env is this start's own
	}
	if len(proxied) > 0 {
		// Registered with the proxy before the pod exists: its first
		// request finds its credentials (deleteObjects unregisters).
		if err := in.setupProxySecrets(ctx, proxied, env, files); err != nil {
			return nil, fmt.Errorf("server %s: %w", k.o.Name, err)
		}
		po.TrustCA = k.o.Inject.CA.CertPEM()
	}
	if k.o.Install != nil {
		inst := *po.Install
		if inst.ConfigMap, err = k.ensureConfigMap(ctx); err != nil {
			return nil, err
		}
		po.Install = &inst
	}
	cert, key, ca, err := k.o.Issue(in.pod)
	if err != nil {
		return nil, fmt.Errorf("issuing the certificate of pod %s: %w", in.pod, err)
	}
	c, ns := k.o.Client, k.o.Namespace
	if err := c.Create(ctx, kube.Secrets, ns, kube.PodTLS(in.tls, po.Gateway, k.o.Name, po.Owner, cert, key, ca), nil); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, kube.Pods, ns, kube.Pod(po), nil); err != nil {
		return nil, err
	}
	var pod *corev1.Pod
	if k.o.Install != nil {
		pod, err = k.install(ctx, in.pod)
	} else {
		// Its errors name the pod; the gateway's say "starting server NAME".
		pod, err = c.WatchPod(ctx, ns, in.pod, podReady)
	}
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(kube.AgentPort))
	conn, err := k.connect(ctx, addr, in.pod, env, files)
	if err != nil {
		// Say how the pod is, which is often why.
		var now corev1.Pod
		if gerr := c.Get(context.WithoutCancel(ctx), kube.Pods, ns, in.pod, &now); gerr == nil {
			return nil, agentMissing(&now, fmt.Errorf("connecting to the agent of pod %s (%s): %w", in.pod, podStatus(&now), err))
		}
		return nil, fmt.Errorf("connecting to the agent of pod %s: %w", in.pod, err)
	}
	in.conn = conn
	in.followStderr()
	in.rec.Pod = in.pod
	in.rec.Phase = in.phase
	in.rec.SetState(gateway.StateRunning)
	in.untrack = k.obs().SandboxStarted(k.o.Name, scope, in.rec)
	k.live.add(in)
	k.podsMu.Lock()
	if k.byPod == nil {
		k.byPod = map[string]*kubeInstance{}
	}
	k.byPod[in.pod] = in
	k.podsMu.Unlock()
	k.log.Info("pod started", "server", k.o.Name, "pod", in.pod, "ip", pod.Status.PodIP)
	return in, nil
}

// connect retries the agent while it does not listen yet (the pod runs
// before its agent listens), looking at the pod once a second: an agent
// that ended will not listen.
func (k *Kube) connect(ctx context.Context, addr, pod string, env map[string]string, files map[string][]byte) (mcp.Connection, error) {
	delay := 20 * time.Millisecond
	checked := time.Now()
	for {
		conn, err := k.o.Connect(ctx, addr, pod, env, files)
		if err == nil || !isRefused(err) {
			return conn, err
		}
		if time.Since(checked) >= time.Second {
			checked = time.Now()
			var p corev1.Pod
			if gerr := k.o.Client.Get(ctx, kube.Pods, k.o.Namespace, pod, &p); gerr == nil && p.Status.Phase != corev1.PodRunning {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}

func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// podReady: the pod runs and has an IP; a pod that ended or cannot start
// is an error that says why.
func podReady(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodRunning:
		return p.Status.PodIP != "", nil
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, agentMissing(p, fmt.Errorf("pod %s ended before it served: %s", p.Name, podStatus(p)))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" ||
			w.Reason == "CreateContainerConfigError" || w.Reason == "InvalidImageName") {
			return false, fmt.Errorf("pod %s cannot start: %s: %s", p.Name, w.Reason, w.Message)
		}
	}
	return false, nil
}

// agentMissing adds to err, about pod p that ended, where the agent was
// looked for when the container that runs it first exited with the
// shell's code for a command not found or not executable (126, 127): the
// agent image's, if its copy failed; else the server's image's, unless
// the agent was a copy.
func agentMissing(p *corev1.Pod, err error) error {
	notFound := func(statuses []corev1.ContainerStatus, name string) bool {
		for _, cs := range statuses {
			if t := cs.State.Terminated; cs.Name == name && t != nil && (t.ExitCode == 126 || t.ExitCode == 127) {
				return true
			}
		}
		return false
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == kube.AgentContainer && notFound(p.Status.InitContainerStatuses, c.Name) {
			return fmt.Errorf("%w; copying the agent: is mcpbox at backend.agent_path (%s) in backend.agent_image %s?", err, c.Command[0], c.Image)
		}
	}
	if len(p.Spec.Containers) == 0 || !notFound(p.Status.ContainerStatuses, p.Spec.Containers[0].Name) {
		return err
	}
	c := p.Spec.Containers[0]
	if len(c.Command) == 0 || c.Command[0] == kube.AgentBin {
		return err
	}
	return fmt.Errorf("%w; is mcpbox at backend.agent_path (%s) in the image %s? Set backend.agent_image to copy the agent into the pod from an image that has it", err, c.Command[0], c.Image)
}

// podStatus says how a pod's server container ended.
func podStatus(p *corev1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("init container %s exited with status %d", cs.Name, t.ExitCode)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			s := fmt.Sprintf("exited with status %d", t.ExitCode)
			switch t.Reason {
			case "OOMKilled":
				s = "killed: out of memory"
			case "", "Error", "Completed":
			default:
				s += " (" + t.Reason + ")"
			}
			return s
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.LastTerminationState.Terminated; t != nil {
			return fmt.Sprintf("restarted after exiting with status %d", t.ExitCode)
		}
	}
	if p.Status.Reason != "" {
		return p.Status.Reason + ": " + p.Status.Message
	}
	return string(p.Status.Phase)
}

// resolveSecrets resolves the server's secrets, teaches the book their
// values, and returns the plain ones as the agent's start request (env
// or files) and those added at the proxy.
func (k *Kube) resolveSecrets(ctx context.Context) (map[string]string, map[string][]byte, []ProxySecret, error) {
	var proxied []ProxySecret
	for _, sec := range k.o.Secrets {
		if sec.Inject == nil {
			continue
		}
		p, err := k.resolveProxySecret(ctx, sec)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("secret %s: %w", sec.Name, err)
		}
		if err := p.Learn(k.o.Book); err != nil {
			return nil, nil, nil, err
		}
		proxied = append(proxied, p)
	}
	env, files := map[string]string{}, map[string][]byte{}
	for _, sec := range k.o.Secrets {
		if sec.Inject != nil {
			continue
		}
		s, err := k.resolveSecret(ctx, sec)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("secret %s: %w", sec.Name, err)
		}
		if err := k.o.Book.Add(s.Name, s.Value); err != nil {
			return nil, nil, nil, fmt.Errorf("secret %s: %w", s.Name, err)
		}
		if s.AsFile {
			files[s.Name] = s.Value
		} else {
			env[s.Name] = string(s.Value)
		}
	}
	return env, files, proxied, nil
}

// resolveSecret resolves one secret of the server: a kubernetes:
// reference by reading the Secret in the namespace through the API, with
// the gateway's own permission, at every start (so a changed Secret
// reaches the next pod), any other as a local sandbox's is. The gateway
// reads the value itself, rather than have the pod mount the Secret,
// because the book must know it to redact it.
func (k *Kube) resolveSecret(ctx context.Context, sec config.Secret) (sandbox.Secret, error) {
	asFile := sec.As == config.SecretAsFile
	r, ok, err := config.ParseKubeSecretRef(sec.From)
	switch {
	case !ok:
		return ResolveSecret(ctx, sec.Name, sec.From, asFile)
	case err != nil:
		return sandbox.Secret{}, err
	}
	v, err := k.o.Client.SecretKey(ctx, k.o.Namespace, r.Secret, r.Key)
	if err != nil {
		return sandbox.Secret{}, err
	}
	if v, err = secrets.Accept(v, r.String(), secrets.Options{}); err != nil {
		return sandbox.Secret{}, err
	}
	return sandbox.Secret{Name: sec.Name, Value: v, AsFile: asFile}, nil
}

// resolveProxySecret resolves a secret added at the proxy: its
// kubernetes: reference read through the API as resolveSecret reads one
// (at every start, checked, never in the pod), any other as a local
// sandbox's is. The value goes to the proxy's replicas only.
func (k *Kube) resolveProxySecret(ctx context.Context, sec config.Secret) (ProxySecret, error) {
	if _, ok, _ := config.ParseKubeSecretRef(sec.From); !ok || sec.Inject.AWS != nil {
		return ResolveProxySecret(ctx, sec)
	}
	v, err := k.resolveSecret(ctx, sec)
	if err != nil {
		return ProxySecret{}, err
	}
	local := sec
	local.From = "" // resolved above
	p, err := ResolveProxySecret(ctx, local)
	p.Cred.Value = string(v.Value)
	return p, err
}

// ensurePolicy creates the server's NetworkPolicy once; one that exists
// (a start after a failed one) is kept.
func (k *Kube) ensurePolicy(ctx context.Context) error {
	k.policyOnce.Do(func() {
		np := kube.NetworkPolicy(kube.PolicyOptions{Gateway: k.o.Gateway.ID(), Server: k.o.Name,
			Owner: k.o.Gateway.Ref(), Proxy: k.o.Proxy, GatewayFrom: kube.CIDRPeers(k.o.GatewayCIDRs)})
		if err := k.o.Client.Create(ctx, kube.NetworkPolicies, k.o.Namespace, np, nil); err != nil && !kube.IsAlreadyExists(err) {
			k.policyErr = err
		}
	})
	if k.policyErr != nil {
		// Fail closed, and try again at the next start.
		err := k.policyErr
		k.policyOnce, k.policyErr = sync.Once{}, nil
		return fmt.Errorf("server %s: the network policy: %w", k.o.Name, err)
	}
	return nil
}

// ensureClaim makes the scope's workspace claim unless it exists. It has
// no owner: it outlives the gateway, as a local workspace does.
func (k *Kube) ensureClaim(ctx context.Context, scope gateway.Scope, hash string) (string, error) {
	name := "mcpbox-ws-" + kube.LabelValue(k.o.Name, 30) + "-" + hash
	size := k.o.Pod.OutputSize
	if size == 0 {
		size = 1 << 30
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kube.LabelManagedBy: kube.ManagedBy,
			kube.LabelServer: kube.LabelValue(k.o.Name, 63), kube.LabelScope: hash}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	if k.o.StorageClass != "default" {
		pvc.Spec.StorageClassName = &k.o.StorageClass
	}
	if scope.Session != "" {
		// A session's workspace goes with the gateway (Release deletes
		// it sooner).
		pvc.OwnerReferences = []metav1.OwnerReference{k.o.Gateway.Ref()}
	}
	err := k.o.Client.Create(ctx, kube.PVCs, k.o.Namespace, pvc, nil)
	if err != nil && !kube.IsAlreadyExists(err) {
		return "", err
	}
	return name, nil
}

// scopeKey is a scope's identity as text, without its era: the pods of
// both eras' instances (gateway.Scope.Modern) share the scope's label and
// workspace claim, as local sandboxes share the workspace.
func scopeKey(s gateway.Scope) string { return "agent=" + s.Agent + "\x00session=" + s.Session }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Release deletes a session's workspace claim once the session is over.
func (k *Kube) Release(scope gateway.Scope) {
	if scope.Session == "" || k.o.StorageClass == "" || !k.o.Pod.Output {
		return
	}
	name := "mcpbox-ws-" + kube.LabelValue(k.o.Name, 30) + "-" + kube.ScopeHash(scopeKey(scope))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.o.Client.Delete(ctx, kube.PVCs, k.o.Namespace, name); err != nil {
		k.log.Warn("deleting a session's workspace claim", "server", k.o.Name, "claim", name, "err", err)
	}
}

// Egress audits one egress decision of the egress proxy (its log line)
// for pod, as a local sandbox's proxy decision is audited: the record
// names the server, the pod's scope and sandbox, and the call running
// then joins it. It reports false for a pod this backend did not start
// (or that stopped more than a minute ago), which is not audited.
func (k *Kube) Egress(pod string, ev egress.Event) bool {
	k.podsMu.Lock()
	in := k.byPod[pod]
	k.podsMu.Unlock()
	if in == nil {
		return false
	}
	ev = redactEvent(k.o.Book, ev)
	in.rec.Opened(ev)
	in.rec.Closed(ev)
	k.obs().EgressEvent(k.o.Name, in.scope, in.rec, ev)
	return true
}

// followStderr copies the pod's log to Stderr until the pod stops.
func (in *kubeInstance) followStderr() {
	k := in.k
	if k.o.Stderr == nil {
		return
	}
	lines := &lineWriter{w: k.o.Stderr, prefix: "mcpbox: server " + k.o.Name + ": "}
	var out io.WriteCloser = lines
	if r := k.o.Book.Redactor(); r != nil {
		out = r.QuietWriter(lines, stderrQuiet)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.o.Client.FollowPodLog(ctx, kube.FollowOptions{Namespace: k.o.Namespace, Container: kube.ServerContainer,
			Line: func(_ string, b []byte) { out.Write(append(b, '\n')) },
			Errors: func(pod string, err error) {
				if kube.IsForbidden(err) {
					k.logDenied.Do(func() {
						k.log.Warn("the server's stderr cannot be shown: the gateway may not read pod logs (get on pods/log); apply `mcpbox kube rbac`", "server", k.o.Name, "err", err)
					})
					return
				}
				k.log.Debug("following a pod's log", "server", k.o.Name, "pod", pod, "err", err)
			}}, in.pod)
	}()
	in.stopStderr = func() {
		cancel()
		<-done
		out.Close()
		lines.Close()
	}
}

// phase is the pod's phase as the API has it now, for `mcpbox ps`.
func (in *kubeInstance) phase() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p corev1.Pod
	if err := in.k.o.Client.Get(ctx, kube.Pods, in.k.o.Namespace, in.pod, &p); err != nil {
		if kube.IsNotFound(err) {
			return "gone"
		}
		return "unknown"
	}
	return string(p.Status.Phase)
}

// List returns the pods started and not yet stopped.
func (k *Kube) List() []Instance { return k.live.list() }

// Scope is the scope the pod serves.
func (in *kubeInstance) Scope() gateway.Scope { return in.scope }

// Stop reads how the pod's server ended (a crash is not a stop), then
// deletes the pod and its TLS Secret. The workspace claim stays.
func (in *kubeInstance) Stop() {
	in.once.Do(func() {
		k := in.k
		in.rec.MarkStopping()
		ctx, cancel := context.WithTimeout(context.Background(), endWait+5*time.Second)
		in.status, in.expected, in.exited0 = in.ending(ctx)
		cancel()
		// Its own bound: the wait for the pod's status must not eat the
		// delete's (a pod left running holds the server's secrets).
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		in.deleteObjects(ctx)
		if in.stopStderr != nil {
			in.stopStderr()
		}
		in.rec.SetExit(in.status)
		if in.expected {
			in.rec.SetState(gateway.StateStopped)
		} else {
			in.rec.SetState(gateway.StateFailed)
		}
		k.obs().SandboxEnded(k.o.Name, in.scope, in.rec, in.status, in.expected)
		if in.untrack != nil {
			in.untrack()
		}
		k.live.remove(in)
		time.AfterFunc(egressLate, func() {
			k.podsMu.Lock()
			delete(k.byPod, in.pod)
			k.podsMu.Unlock()
		})
		close(in.ended)
	})
}

// endedConn is the connection podagent.Connect returns: it tells
// whether it ended on its own before it was closed. KubeOptions.Connect
// must return it as it is, not wrapped, for a crash to be told from a
// stop.
type endedConn interface {
	Ended() (bool, error)
}

// endWait bounds how long Stop waits, once the connection to a pod ended
// on its own, for the pod's status to show how its server ended (the
// kubelet reports it within a few seconds).
const endWait = 15 * time.Second

// ending reads how the pod's server ended, and whether that was a stop
// (expected) and an exit with status 0 (exited0): a pod that exited 0 or
// still ran when mcpbox stopped it was stopped; one that failed or was
// deleted was not, nor one whose connection ended while it ran (the
// agent exits when its server does, and the pod's status shows that a
// moment later: the reason to wait).
func (in *kubeInstance) ending(ctx context.Context) (status string, expected, exited0 bool) {
	var ended bool
	var connErr error
	if c, ok := in.conn.(endedConn); ok {
		ended, connErr = c.Ended()
	}
	deadline := time.Now().Add(endWait)
	for {
		var pod corev1.Pod
		err := in.k.o.Client.Get(ctx, kube.Pods, in.k.o.Namespace, in.pod, &pod)
		switch {
		case err == nil && (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded):
			ok := pod.Status.Phase == corev1.PodSucceeded
			return podStatus(&pod), ok, ok
		case kube.IsNotFound(err):
			return "the pod was deleted", false, false
		case !ended:
			return "stopped", true, false
		case time.Now().After(deadline):
			return fmt.Sprintf("its connection ended while the pod ran: %v", connErr), false, false
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("its connection ended: %v", connErr), false, false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// deleteObjects deletes the pod and its TLS Secret, and takes its
// registration back from the egress proxy.
func (in *kubeInstance) deleteObjects(ctx context.Context) {
	if in.registered {
		in.k.o.Inject.Unregister(in.pod)
	}
	c, ns := in.k.o.Client, in.k.o.Namespace
	for _, o := range []struct {
		r          kube.Resource
		name, what string
	}{{kube.Pods, in.pod, "a pod"}, {kube.Secrets, in.tls, "a pod's TLS secret"}} {
		err := c.Delete(ctx, o.r, ns, o.name)
		if err == nil || kube.IsNotFound(err) {
			continue
		}
		in.k.log.Warn("deleting "+o.what+"; trying again for "+deleteRetry.String(), "server", in.k.o.Name, "name", o.name, "err", err)
		// A pod left running holds the server's secrets: the API out
		// of reach for a while must not leave it until serve ends.
		go in.k.deleteLater(o.r, o.name, o.what)
	}
}

// deleteRetry bounds how long a failed delete of a pod or its secret is
// tried again, every deleteEvery; variables for tests.
var deleteRetry, deleteEvery = 5 * time.Minute, 10 * time.Second

// deleteLater tries to delete the object again until it is gone or
// deleteRetry has passed.
func (k *Kube) deleteLater(r kube.Resource, name, what string) {
	deadline := time.Now().Add(deleteRetry)
	for time.Now().Before(deadline) {
		time.Sleep(deleteEvery)
		ctx, cancel := context.WithTimeout(context.Background(), deleteEvery)
		err := k.o.Client.Delete(ctx, r, k.o.Namespace, name)
		cancel()
		if err == nil || kube.IsNotFound(err) {
			k.log.Info("deleted "+what+" at a later try", "server", k.o.Name, "name", name)
			return
		}
	}
	k.log.Warn("could not delete "+what+"; it goes when serve stops (its owner) or another gateway collects it", "server", k.o.Name, "name", name)
}

// Pause is not a freeze on Kubernetes: an idle pod is stopped (scaled to
// zero; the workspace claim stays) and the next call starts a new one,
// which the gateway does when Process.Pause is nil.
func (in *kubeInstance) Pause() error { return ErrUnsupported }

// Resume: see Pause.
func (in *kubeInstance) Resume() error { return ErrUnsupported }

// Stats is not read from the cluster (that needs the metrics API).
func (in *kubeInstance) Stats() (cgroup.Stats, error) { return cgroup.Stats{}, ErrUnsupported }

// Process hands the gateway the agent's connection; Pause is left nil so
// that idleness stops the pod.
func (in *kubeInstance) Process() *gateway.Process {
	return &gateway.Process{
		Conn:  in.conn,
		Stop:  in.Stop,
		Roots: kubeRoots(in.k.o.Pod),
		Clean: func() bool {
			select {
			case <-in.ended:
				return in.exited0
			case <-time.After(stopGrace):
				return false
			}
		},
		Describe: func() string {
			select {
			case <-in.ended:
				return in.status
			default:
				return ""
			}
		},
	}
}

func kubeRoots(po kube.PodOptions) []gateway.Root {
	var rs []gateway.Root
	if po.InputClaim != "" {
		rs = append(rs, gateway.Root{URI: "file://" + kube.InputDir, Name: "input"})
	}
	if po.Output || po.OutputClaim != "" {
		rs = append(rs, gateway.Root{URI: "file://" + kube.OutputDir, Name: "output"})
	}
	return rs
}

// PodName is the name of the instance's pod (for tests and `mcpbox ps`).
func PodName(in Instance) string {
	if k, ok := in.(*kubeInstance); ok {
		return k.pod
	}
	return ""
}
