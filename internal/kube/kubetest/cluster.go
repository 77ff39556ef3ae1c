package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mcpbox/internal/procgroup"
)

// The versions scripts/kube-bins.sh builds by default; TestVersionsMatchScript
// keeps the two in step.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.7.0"
)

// BinDir is where scripts/kube-bins.sh puts the binaries: $MCPBOX_KUBE_BINS
// if set, else ${MCPBOX_KUBE_CACHE:-$HOME/.cache/mcpbox-ci}/kube-VERSION-etcd-VERSION.
func BinDir() string {
	if d := os.Getenv("MCPBOX_KUBE_BINS"); d != "" {
		return d
	}
	cache := os.Getenv("MCPBOX_KUBE_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "mcpbox-ci")
	}
	return filepath.Join(cache, "kube-"+KubeVersion+"-etcd-"+EtcdVersion)
}

// Options tunes Start. The zero value is a full cluster: etcd, the API
// server, the controller manager and the test node.
type Options struct {
	// NoNode leaves the test node out: pods stay Pending.
	NoNode bool
	// NoControllerManager leaves kube-controller-manager out: no garbage
	// collection, Deployments, ReplicaSets or default service accounts
	// (pods then need automountServiceAccountToken: false and a namespace
	// whose "default" service account the test creates). Saves ~1s.
	NoControllerManager bool
	// NodeLabels are added to the test node's labels (it always has
	// kubernetes.io/hostname and kubernetes.io/os=linux).
	NodeLabels map[string]string
	// MaxGrace bounds how long the test node waits after SIGTERM before
	// SIGKILL, whatever the pod's grace period. Zero means 10s.
	MaxGrace time.Duration
}

// Cluster is a running control plane. Its fields are read-only.
type Cluster struct {
	// Dir holds the certificates, kubeconfigs, logs, etcd's data and the
	// test node's pod directories; it is removed at cleanup.
	Dir string
	// Server is the API server's URL, https://127.0.0.1:PORT.
	Server string
	// Kubeconfig is the path of a kubeconfig for the admin user
	// (kubetest-admin in system:masters: RBAC allows it everything).
	Kubeconfig string
	// CAPEM is the cluster CA, which signed the API server's certificate
	// and every client certificate.
	CAPEM []byte
	// Admin is a client authenticated as the admin user.
	Admin *Client
	// Node is the test node, nil with Options.NoNode.
	Node *Node
	// StartupTime is how long Start took until the cluster was ready.
	StartupTime time.Duration

	ca    *ca
	procs []*process
}

// NodeName is the name of the test node's Node object.
const NodeName = "mcpbox-test-node"

// Start starts a cluster for the test and stops it in t.Cleanup. Missing
// binaries fail the test with the command that builds them, unless
// MCPBOX_KUBE_SKIP=1, which skips it.
func Start(t testing.TB) *Cluster { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	bins := requireBins(t, opts)
	begin := time.Now()
	// Not t.TempDir: the cluster's files must outlive the processes that
	// write them, which Cleanup (registered below, run first) stops.
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir}
	t.Cleanup(func() { c.stop(t) })
	if err := c.start(bins, opts); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	c.StartupTime = time.Since(begin)
	return c
}

// requireBins returns the binaries' directory, or fails (or skips, with
// MCPBOX_KUBE_SKIP=1) the test if a binary is missing or the test node
// cannot run.
func requireBins(t testing.TB, opts Options) string {
	t.Helper()
	if !hostSupported {
		t.Skip("kubetest: the test cluster runs Linux binaries, its node Linux namespaces")
	}
	bins := BinDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			if os.Getenv("MCPBOX_KUBE_SKIP") == "1" {
				t.Skipf("kubetest: %s missing and MCPBOX_KUBE_SKIP=1", filepath.Join(bins, b))
			}
			t.Fatalf("kubetest: %s missing: run scripts/kube-bins.sh once (a few minutes; MCPBOX_KUBE_SKIP=1 skips these tests)", filepath.Join(bins, b))
		}
	}
	if !opts.NoNode && os.Geteuid() != 0 {
		if os.Getenv("MCPBOX_KUBE_SKIP") == "1" {
			t.Skip("kubetest: the test node needs root (mount namespaces) and MCPBOX_KUBE_SKIP=1")
		}
		t.Fatal("kubetest: the test node needs root: it mounts each pod's volumes in a mount namespace of its own")
	}
	if !opts.NoNode {
		for _, tool := range []string{"/usr/bin/unshare", "/usr/bin/setpriv", "/usr/sbin/chroot", "/usr/bin/env", "/bin/sh"} {
			if _, err := os.Stat(tool); err != nil {
				t.Fatalf("kubetest: the test node runs containers with %s (util-linux, coreutils): %v", tool, err)
			}
		}
	}
	return bins
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared returns one full cluster for all the tests of a package that call
// it, started by the first (saving Start's seconds for each further test).
// Tests sharing it keep to namespaces of their own. The package's TestMain
// must call StopShared after m.Run; should it not, the processes still die
// with the test binary (PDEATHSIG), but the cluster's directory stays.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	bins := requireBins(t, Options{})
	shared.once.Do(func() {
		begin := time.Now()
		dir, err := os.MkdirTemp("", "kubetest-")
		if err != nil {
			shared.err = err
			return
		}
		shared.c = &Cluster{Dir: dir}
		if shared.err = shared.c.start(bins, Options{}); shared.err == nil {
			shared.c.StartupTime = time.Since(begin)
		}
	})
	if shared.err != nil {
		t.Fatalf("kubetest: the shared cluster: %v", shared.err)
	}
	return shared.c
}

// StopShared stops the cluster Shared started, if any.
func StopShared() {
	if shared.c != nil {
		shared.c.stop(nil)
	}
}

func (c *Cluster) start(bins string, opts Options) error {
	for _, d := range []string{"pki", "logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	var err error
	if c.ca, err = newCA(); err != nil {
		return err
	}
	c.CAPEM = c.ca.certPEM
	pki := filepath.Join(c.Dir, "pki")
	write := func(name string, data []byte) string {
		p := filepath.Join(pki, name)
		if err == nil {
			err = os.WriteFile(p, data, 0o600)
		}
		return p
	}
	caFile := write("ca.crt", c.ca.certPEM)
	servCert, servKey, err := c.ca.issue("kube-apiserver", nil, true)
	if err != nil {
		return err
	}
	servCertFile, servKeyFile := write("apiserver.crt", servCert), write("apiserver.key", servKey)
	adminCert, adminKey, err := c.ca.issue("kubetest-admin", []string{"system:masters"}, false)
	if err != nil {
		return err
	}
	saKey, saPub, err := writeServiceAccountKey(pki)
	if err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	c.Server = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	c.Kubeconfig = write("admin.kubeconfig", kubeconfig(c.Server, c.ca.certPEM, adminCert, adminKey, "kubetest-admin"))
	if err != nil {
		return fmt.Errorf("writing the certificates: %w", err)
	}
	tc, err := tlsConfig(c.ca.certPEM, adminCert, adminKey)
	if err != nil {
		return err
	}
	c.Admin = &Client{Server: c.Server, HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 32}}}

	if err := c.run(bins, "etcd", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(ports[1])); err != nil {
		return err
	}
	if err := c.run(bins, "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[2]),
		"--tls-cert-file="+servCertFile, "--tls-private-key-file="+servKeyFile,
		"--client-ca-file="+caFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		// Cluster IPs are only numbers here (no kube-proxy): keep them in
		// loopback so nothing that dials one leaves the machine.
		"--service-cluster-ip-range=127.96.0.0/16",
		// No endpoints for the kubernetes Service: its address would be
		// loopback, which the reconciler refuses.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false", "--profiling=false",
		"--cert-dir="+pki,
		// The test node's kubelet (its log API) by its address, not by
		// its host name, which resolves nowhere.
		"--kubelet-preferred-address-types=InternalIP",
	); err != nil {
		return err
	}
	ctx := context.Background()
	if err := poll(ctx, 100*time.Millisecond, 60*time.Second, func() (bool, error) {
		if err := c.exited(); err != nil {
			return false, err
		}
		resp, err := c.Admin.send(ctx, http.MethodGet, "/readyz", nil)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return fmt.Errorf("waiting for the API server's /readyz: %w", err)
	}
	if !opts.NoControllerManager {
		if err := c.run(bins, "kube-controller-manager",
			"--kubeconfig="+c.Kubeconfig,
			"--leader-elect=false", "--secure-port=0",
			"--controllers=garbage-collector-controller,deployment-controller,replicaset-controller,serviceaccount-controller,namespace-controller,root-ca-certificate-publisher-controller",
			"--service-account-private-key-file="+saKey, "--root-ca-file="+caFile,
			"--use-service-account-credentials=false",
			"--concurrent-gc-syncs=5", "--profiling=false",
		); err != nil {
			return err
		}
		// The service-account controller's first "default" account shows
		// the controller manager is up and its informers synced.
		if err := poll(ctx, 100*time.Millisecond, 60*time.Second, func() (bool, error) {
			if err := c.exited(); err != nil {
				return false, err
			}
			err := c.Admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/default/serviceaccounts/default", nil, nil)
			return err == nil, nil
		}); err != nil {
			return fmt.Errorf("waiting for the controller manager (the default service account): %w", err)
		}
	}
	if !opts.NoNode {
		n, err := startNode(c, opts)
		if err != nil {
			return err
		}
		c.Node = n
	}
	return nil
}

// UserKubeconfig writes a kubeconfig for a user the cluster knows only by
// its client certificate (CN user, O groups) and returns its path. RBAC
// decides what the user may do: nothing until a test binds it a role.
func (c *Cluster) UserKubeconfig(t testing.TB, user string, groups ...string) string {
	t.Helper()
	cert, key, err := c.ca.issue(user, groups, false)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(c.Dir, "pki", "user-"+strings.ReplaceAll(user, "/", "_")+".kubeconfig")
	if err := os.WriteFile(p, kubeconfig(c.Server, c.ca.certPEM, cert, key, user), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// UserClient is a Client authenticated as user with groups, like
// UserKubeconfig.
func (c *Cluster) UserClient(t testing.TB, user string, groups ...string) *Client {
	t.Helper()
	cert, key, err := c.ca.issue(user, groups, false)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tlsConfig(c.ca.certPEM, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &Client{Server: c.Server, HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}}
}

// CreateNamespace creates a namespace and waits (bounded) for its
// "default" service account, without which the API server refuses pods.
func (c *Cluster) CreateNamespace(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Admin.Do(ctx, http.MethodPost, "/api/v1/namespaces", ns, nil); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	if err := poll(ctx, 50*time.Millisecond, 30*time.Second, func() (bool, error) {
		return c.Admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+name+"/serviceaccounts/default", nil, nil) == nil, nil
	}); err != nil {
		t.Fatalf("namespace %s: its default service account: %v", name, err)
	}
}

// WaitPod polls the pod until cond holds (bounded by timeout) and returns
// it; a pod that does not exist is passed to cond as nil.
func (c *Cluster) WaitPod(t testing.TB, ns, name string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := poll(context.Background(), 50*time.Millisecond, timeout, func() (bool, error) {
		var p corev1.Pod
		err := c.Admin.Do(context.Background(), http.MethodGet, "/api/v1/namespaces/"+ns+"/pods/"+name, nil, &p)
		switch {
		case IsNotFound(err):
			last = nil
		case err != nil:
			return false, err
		default:
			last = &p
		}
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v; last seen: %s", ns, name, err, describePod(last))
	}
	return last
}

func describePod(p *corev1.Pod) string {
	if p == nil {
		return "gone"
	}
	s := fmt.Sprintf("phase %s node %q ip %q", p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
	for _, cs := range p.Status.ContainerStatuses {
		s += fmt.Sprintf("; %s: %+v", cs.Name, cs.State)
	}
	if p.Status.Message != "" {
		s += "; " + p.Status.Message
	}
	return s
}

// process is one control-plane binary.
type process struct {
	name  string
	cmd   *exec.Cmd
	group *procgroup.Group // the process's group, held by pidfd
	log   string
	done  chan struct{}
	err   error // set before done is closed
}

func (c *Cluster) run(bins, name string, args ...string) error {
	logPath := filepath.Join(c.Dir, "logs", name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(filepath.Join(bins, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = c.Dir
	// Its own process group, and killed with the test binary should that
	// die without running its cleanups.
	cmd.SysProcAttr = groupDiesWithParent()
	g, err := startLeader(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, group: g, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return nil
}

// exited fails if a control-plane process has ended.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v): %s", p.name, p.err, tail(p.log, 15))
		default:
		}
	}
	return nil
}

// stop ends everything the cluster started and removes its directory. t
// is nil for the shared cluster.
func (c *Cluster) stop(t testing.TB) {
	if c.Node != nil {
		c.Node.stop()
	}
	if t != nil && t.Failed() {
		for _, p := range c.procs {
			t.Logf("kubetest: last lines of %s:\n%s", p.name, tail(p.log, 20))
		}
	}
	// Test state is thrown away: SIGKILL (a graceful API server shutdown
	// takes seconds), and every process's group.
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// By pidfd: a process that ended earlier may have left
			// its number to another program's group.
			_ = p.group.Kill()
			<-p.done
			_ = p.group.Close()
		}()
	}
	wg.Wait()
	if c.Admin != nil {
		c.Admin.HTTP.CloseIdleConnections()
	}
	if err := os.RemoveAll(c.Dir); err != nil && t != nil {
		t.Errorf("kubetest: removing %s: %v", c.Dir, err)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts reserves n loopback ports by listening on port 0 and closing,
// which leaves a short window in which another process could take one.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserving a port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
