package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mcpbox/internal/kube"
	"mcpbox/internal/kube/kubetest"
)

// kubeEnv is a control plane with a test node, a namespace and a
// serve config whose backend is that cluster.
type kubeEnv struct {
	cluster *kubetest.Cluster
	client  *kube.Client
	ns      string
	dir     string
	config  string
}

const (
	kubeSecret     = "kube-e2e-secret-0123456789abcdef"
	kubeFileSecret = "kube-e2e-file-secret-fedcba9876543210"
)

// kubeSetup starts the cluster and writes a config with server k (the
// test MCP server) on the kubernetes backend, two clients (alice, bob;
// scope agent), a secret delivered at start, an idle stop of idle, and
// the crash tool denied.
func kubeSetup(t *testing.T, idle string) *kubeEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	e := kubeCluster(t)
	agent, server := kubeBins(t)
	srv := map[string]any{
		"command": []string{server, "-name", "k"},
		"secrets": map[string]any{"API_TOKEN": map[string]string{"from": "env:KUBE_E2E_SECRET"},
			"FILE_TOKEN": map[string]string{"from": "env:KUBE_E2E_FILE_SECRET", "as": "file"}},
		"filesystem": map[string]any{"output": map[string]any{"size": "16Mi"}},
		"tools":      map[string]any{"allow": []string{"*"}, "deny": []string{"crash"}, "approve": []string{"whoami"}},
	}
	if idle != "" {
		srv["lifecycle"] = map[string]any{"idle": idle}
	}
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(e.dir, "state"),
		"clients": []map[string]any{
			{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}},
			{"name": "bob", "token": map[string]string{"from": "env:TOK_BOB"}},
		},
		"backend": map[string]any{"kind": "kubernetes", "namespace": e.ns, "kubeconfig": e.cluster.Kubeconfig,
			"agent_path": agent, "image": "mcpbox.test/base:1"},
		"servers": map[string]any{"k": srv},
	}
	e.writeConfig(t, c)
	return e
}

// writeConfig writes c as the gateway's config, e.config, in e.dir.
func (e *kubeEnv) writeConfig(t *testing.T, c map[string]any) {
	t.Helper()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	e.config = filepath.Join(e.dir, "mcpbox.yaml")
	if err := os.WriteFile(e.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kubeCaller is a tool call through sess under ctx that fails the test
// on an error and returns the result's text.
func kubeCaller(t *testing.T, ctx context.Context, sess *mcp.ClientSession) func(tool string, args map[string]any) string {
	return func(tool string, args map[string]any) string {
		t.Helper()
		got, err := gwCall(ctx, sess, tool, args)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return got
	}
}

// kubeCluster returns the shared cluster with a namespace of this run's
// own (the cluster outlives one -count), an admin client and a gateway
// dir; the caller writes the config.
func kubeCluster(t *testing.T) *kubeEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	e := &kubeEnv{cluster: kubetest.Shared(t), ns: kube.LabelValue(fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()), 40)}
	e.cluster.CreateNamespace(t, e.ns)
	cfg, err := kube.LoadKubeconfig(e.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if e.client, err = kube.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.client.Close)
	e.dir = gwDir(t, mode{uid: -1})
	return e
}

// kubeBins copies mcpbox (the agent) and the test MCP server out of
// /tmp, which a pod's /tmp emptyDir hides on the test node, into a dir
// every uid can read, removed at cleanup.
func kubeBins(tb testing.TB) (agent, server string) {
	tb.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "mcpbox-kube-e2e-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	agent, server = filepath.Join(dir, "mcpbox"), filepath.Join(dir, "mcpserver")
	for src, dst := range map[string]string{mcpboxBin: agent, filepath.Join(goBuild(tb, gwServerPkg), "mcpserver"): server} {
		b, err := os.ReadFile(src)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return agent, server
}

// serve runs the gateway over the config; the pods' logs are kept and
// shown if the test fails.
func (e *kubeEnv) serve(t *testing.T) *gwGateway {
	e.keepLogs(t)
	return gwServe(t, mode{uid: -1}, e.config, "KUBE_E2E_SECRET="+kubeSecret, "KUBE_E2E_FILE_SECRET="+kubeFileSecret,
		"TOK_ALICE=alice-token-0123456789abcdef", "TOK_BOB=bob-token-0123456789abcdef")
}

// keepLogs collects the server pods' logs while the test runs (the test
// node drops them with the pod) and logs them if it fails.
func (e *kubeEnv) keepLogs(t *testing.T) {
	logs := map[string]string{}
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var l corev1.PodList
			err := e.client.List(ctx, kube.Pods, e.ns, "", &l)
			cancel()
			if err != nil {
				continue
			}
			for _, p := range l.Items {
				for _, cn := range []string{kube.ServerContainer, "proxy"} { // a server's, the egress proxy's
					if s, err := e.cluster.Node.Logs(e.ns, p.Name, cn); err == nil && s != "" {
						mu.Lock()
						logs[p.Name] = s
						mu.Unlock()
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			for name, s := range logs {
				t.Logf("pod %s log:\n%s", name, s)
			}
		}
	})
}

// pods lists the server pods in the namespace.
func (e *kubeEnv) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var l corev1.PodList
	if err := e.client.List(ctx, kube.Pods, e.ns, kube.LabelManagedBy+"="+kube.ManagedBy+","+kube.LabelRole+"="+kube.RoleServer, &l); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitPods waits until n server pods are left (not being deleted).
func (e *kubeEnv) waitPods(t *testing.T, n int, d time.Duration) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ps := e.pods(t)
		if len(ps) == n {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d server pods after %s, want %d", len(ps), d, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func kubeSession(t *testing.T, ctx context.Context, g *gwGateway, token string) *mcp.ClientSession {
	hc := &http.Client{Transport: gwBearer{token: token, base: gwHTTP.Transport}}
	return gwConnect(t, ctx, g.url, hc, nil, gwLegacy)
}

// TestKubeGateway runs the gateway core with backend: kubernetes against
// a real API server and the test node: tools over HTTP to a server in a
// pod, per-agent scopes as distinct pods, policy deny, a secret delivered
// at start and redacted, the pods' hardening and network policy as the
// API server holds them, and everything gone after the gateway stops.
func TestKubeGateway(t *testing.T) {
	e := kubeSetup(t, "")
	g := e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	if got := gwMustCall(t, alice, "echo", map[string]any{"text": "hi from a pod"}, "hi from a pod"); got == "" {
		t.Fatal("empty echo")
	}
	names := gwToolNames(t, ctx, alice)
	if !names["echo"] || names["crash"] {
		t.Errorf("tools/list: %v (want echo, not the denied crash)", names)
	}
	if _, err := gwCall(ctx, alice, "crash", nil); err == nil {
		t.Error("the denied tool crash was called")
	}
	// The secret reached the server (its env) and comes back redacted.
	got, err := gwCall(ctx, alice, "getenv", map[string]any{"text": "API_TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, kubeSecret) || !strings.Contains(got, "REDACTED") {
		t.Errorf("getenv API_TOKEN through the gateway = %q, want it redacted", got)
	}
	// ... and is in no object of the API server.
	raw, err := json.Marshal(e.pods(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), kubeSecret) {
		t.Error("the secret is in a pod object")
	}
	bob := kubeSession(t, ctx, g, "bob-token-0123456789abcdef")
	ia := gwMustCall(t, alice, "instance", nil, "")
	ib := gwMustCall(t, bob, "instance", nil, "")
	if ia == ib {
		t.Errorf("alice and bob share a server instance %q", ia)
	}
	pods := e.waitPods(t, 2, 30*time.Second)
	if pods[0].Labels[kube.LabelScope] == pods[1].Labels[kube.LabelScope] {
		t.Errorf("two agents' pods have one scope label %q", pods[0].Labels[kube.LabelScope])
	}
	for _, p := range pods {
		kubeCheckPod(t, &p)
	}
	kubePsAndStderr(t, e, g, alice, pods)
	var nps networkingv1.NetworkPolicyList
	if err := e.client.List(ctx, kube.NetworkPolicies, e.ns, kube.LabelManagedBy+"=mcpbox", &nps); err != nil {
		t.Fatal(err)
	}
	if len(nps.Items) != 1 {
		t.Fatalf("%d network policies, want 1", len(nps.Items))
	}
	np := nps.Items[0]
	if len(np.Spec.Egress) != 0 || len(np.Spec.Ingress) != 1 || np.Spec.PodSelector.MatchLabels[kube.LabelServer] != "k" ||
		np.OwnerReferences[0].UID != pods[0].OwnerReferences[0].UID {
		t.Errorf("network policy %+v", np.Spec)
	}
	// The stop deletes the gateway's owner object: the garbage collector
	// takes everything else.
	gwClose(t, alice)
	gwClose(t, bob)
	g.stop(t)
	e.waitPods(t, 0, 60*time.Second)
}

// kubePsAndStderr: `mcpbox ps` lists each pod's sandbox with the pod's
// name, phase and owner; what alice's server writes to stderr reaches
// the gateway's log as a local server's does (prefixed with the server's
// name), through the pod's log, with the secret redacted.
func kubePsAndStderr(t *testing.T, e *kubeEnv, g *gwGateway, alice *mcp.ClientSession, pods []corev1.Pod) {
	t.Helper()
	r := mode{uid: -1}.mcpbox(t, 60*time.Second, "", "ps", "--json", "--config", e.config)
	if r.code != 0 {
		t.Fatalf("mcpbox ps: %s", r)
	}
	rows := auDecode(t, r.stdout)
	owners := map[string]string{}
	for _, row := range rows {
		if row.str("state") == "running" {
			owners[row.str("pod")] = row.str("client") + "/" + row.str("phase")
		}
	}
	for _, p := range pods {
		if o := owners[p.Name]; o != "alice/Running" && o != "bob/Running" {
			t.Errorf("mcpbox ps: pod %s: owner/phase %q; rows %v", p.Name, o, rows)
		}
	}
	if len(owners) != len(pods) {
		t.Errorf("mcpbox ps lists %d running pods, want %d: %v", len(owners), len(pods), rows)
	}
	mark := "stderr-from-pod-" + gwHex(4)
	gwMustCall(t, alice, "stderr", map[string]any{"text": mark + " " + kubeSecret}, "")
	want := "mcpbox: server k: " + mark + " "
	if !g.logs.waitFor(want, 20*time.Second) {
		t.Fatalf("the gateway's log lacks %q after 20s", want)
	}
	if strings.Contains(g.logs.String(), kubeSecret) {
		t.Error("the gateway's log holds the secret the pod's server wrote to stderr")
	}
}

// kubeCheckPod asserts a server pod's hardening as the API server holds
// it.
func kubeCheckPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	s := p.Spec
	c := s.Containers[0]
	sc := c.SecurityContext
	switch {
	case s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken:
		t.Errorf("pod %s: service-account token mounted", p.Name)
	case sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Add) > 0 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("pod %s: security context %+v", p.Name, sc)
	case !*s.SecurityContext.RunAsNonRoot || *s.SecurityContext.RunAsUser != kube.RunAsUser:
		t.Errorf("pod %s: runs as %+v", p.Name, s.SecurityContext)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("pod %s: no RuntimeDefault seccomp", p.Name)
	case c.Resources.Limits.Memory().Value() == 0:
		t.Errorf("pod %s: no memory limit", p.Name)
	case len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ConfigMap":
		t.Errorf("pod %s: owner %v", p.Name, p.OwnerReferences)
	case p.Labels[kube.LabelGateway] == "" || p.Labels[kube.LabelServer] != "k":
		t.Errorf("pod %s: labels %v", p.Name, p.Labels)
	}
	for _, e := range c.Env {
		if strings.Contains(e.Name, "TOKEN") {
			t.Errorf("pod %s: env %s in the pod spec", p.Name, e.Name)
		}
	}
}

// TestKubeIdleWake: an idle pod is deleted (scale to zero) and the next
// call starts a new one.
func TestKubeIdleWake(t *testing.T) {
	e := kubeSetup(t, "2s")
	g := e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	first := gwMustCall(t, alice, "instance", nil, "")
	before := e.waitPods(t, 1, 30*time.Second)
	e.waitPods(t, 0, 60*time.Second)
	second := gwMustCall(t, alice, "instance", nil, "")
	if first == second {
		t.Errorf("the same instance %q after an idle stop", first)
	}
	after := e.waitPods(t, 1, 30*time.Second)
	if before[0].Name == after[0].Name {
		t.Errorf("the pod %s was not replaced", after[0].Name)
	}
}

// TestKubeServerCrash: a server that exits with status 3 in its pod is
// audited as a crash with that status, and the call it ended says so, as
// for a local sandbox; the next call gets a new pod. (Its connection
// ends a moment before the pod's status shows the exit: the gateway took
// the still running pod for a stop.)
func TestKubeServerCrash(t *testing.T) {
	e := kubeSetup(t, "")
	b, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["servers"].(map[string]any)["k"].(map[string]any)["tools"] = map[string]any{"allow": []string{"*"}}
	e.writeConfig(t, c)
	g := e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	first := gwMustCall(t, alice, "instance", nil, "")
	pod := e.waitPods(t, 1, 30*time.Second)[0].Name
	_, err = gwCall(ctx, alice, "crash", nil)
	if err == nil || !strings.Contains(err.Error(), "exited with status 3") {
		t.Fatalf("the call the crash ended: %v, want an error saying it exited with status 3", err)
	}
	if again, err := gwCall(ctx, alice, "instance", nil); err != nil || again == first {
		t.Fatalf("the call after the crash: %q, %v (before: %q)", again, err, first)
	}
	var ends []string
	for _, r := range auDecode(t, mode{uid: -1}.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", e.config, "--server", "k").stdout) {
		if ev := r.str("event"); ev == "sandbox_stop" || ev == "sandbox_crash" {
			ends = append(ends, ev+": "+r.str("exit_status"))
		}
	}
	if len(ends) == 0 || !strings.HasPrefix(ends[0], "sandbox_crash: ") || !strings.Contains(ends[0], "status 3") {
		t.Errorf("the end of pod %s audited as %q, want a sandbox_crash with status 3", pod, ends)
	}
}

// TestKubeCrashCleanup: a gateway killed with SIGKILL leaves its pods;
// once its lease has expired (here: its renew time set 5 minutes back,
// as if the gateway had been dead that long) the next gateway to start in
// the namespace deletes its owner object and the garbage collector its
// pods, while the new gateway's own pods serve.
func TestKubeCrashCleanup(t *testing.T) {
	e := kubeSetup(t, "")
	g := e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	gwMustCall(t, alice, "echo", map[string]any{"text": "x"}, "x")
	old := e.waitPods(t, 1, 30*time.Second)[0]
	dead := old.Labels[kube.LabelGateway]
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-g.done
	g.err = nil // killed on purpose: the cleanup's exit check does not apply
	// Still there: nobody deleted anything.
	if ps := e.pods(t); len(ps) != 1 || ps[0].Name != old.Name {
		t.Fatalf("pods after the crash: %d", len(ps))
	}
	past := time.Now().Add(-5 * time.Minute).UTC().Format("2006-01-02T15:04:05.000000Z")
	if err := e.client.Patch(ctx, kube.Leases, e.ns, kube.LeaseName(dead),
		map[string]any{"spec": map[string]any{"renewTime": past}}, nil); err != nil {
		t.Fatal(err)
	}
	g2 := e.serve(t)
	bob := kubeSession(t, ctx, g2, "bob-token-0123456789abcdef")
	gwMustCall(t, bob, "echo", map[string]any{"text": "y"}, "y")
	deadline := time.Now().Add(60 * time.Second)
	for {
		var left []string
		for _, p := range e.pods(t) {
			if p.Labels[kube.LabelGateway] == dead {
				left = append(left, p.Name)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods of the dead gateway %s left: %v", dead, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var cm corev1.ConfigMap
	if err := e.client.Get(ctx, kube.ConfigMaps, e.ns, kube.OwnerName(dead), &cm); !kube.IsNotFound(err) {
		t.Errorf("the dead gateway's owner object: %v, want not found", err)
	}
}

// TestKubeStdio: serve over stdio with the server in a pod; a secret
// delivered as a file reaches /run/secrets in the pod (a memory
// emptyDir) and comes back redacted.
func TestKubeStdio(t *testing.T) {
	e := kubeSetup(t, "")
	e.keepLogs(t)
	sess, _ := imServe(t, mode{uid: -1}, e.config, "KUBE_E2E_SECRET="+kubeSecret, "KUBE_E2E_FILE_SECRET="+kubeFileSecret,
		"TOK_ALICE=alice-token-0123456789abcdef", "TOK_BOB=bob-token-0123456789abcdef")
	gwMustCall(t, sess, "echo", map[string]any{"text": "over stdio"}, "over stdio")
	got := gwMustCall(t, sess, "read_any", map[string]any{"path": "/run/secrets/FILE_TOKEN"}, "")
	if strings.Contains(got, kubeFileSecret) || !strings.Contains(got, "REDACTED") {
		t.Errorf("the file secret through the gateway = %q, want it redacted", got)
	}
	if ps := e.pods(t); len(ps) != 1 {
		t.Errorf("%d pods, want 1", len(ps))
	}
}

// TestKubeApproval: a tool under review runs in its pod only once the
// client's human approves it, and not when they deny it.
func TestKubeApproval(t *testing.T) {
	e := kubeSetup(t, "")
	g := e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc := &http.Client{Transport: gwBearer{token: "alice-token-0123456789abcdef", base: gwHTTP.Transport}}
	for _, answer := range []string{"once", "deny"} {
		var forms []string
		opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			forms = append(forms, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": answer}}, nil
		}}
		sess := gwConnect(t, ctx, g.url, hc, opts, gwLegacy)
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: %v", answer, err)
		}
		text := gwText(res)
		if len(forms) != 1 || !strings.Contains(forms[0], "whoami") {
			t.Fatalf("%s: approval forms %q, want one naming whoami", answer, forms)
		}
		switch {
		case answer == "once" && (res.IsError || text != "k"):
			t.Errorf("approved: %q isError=%v, want the pod's server's name k", text, res.IsError)
		case answer == "deny" && (!res.IsError || !strings.Contains(text, "approval")):
			t.Errorf("denied: %q isError=%v, want an error about approval", text, res.IsError)
		}
	}
}

// TestKubePin: `mcpbox pin` starts a kubernetes server's pod to read its
// tools, records them, and leaves nothing in the cluster.
func TestKubePin(t *testing.T) {
	e := kubeSetup(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := mode{uid: -1}.command(ctx, "pin", "--config", e.config)
	cmd.Env = append(cmd.Env, "KUBE_E2E_SECRET="+kubeSecret, "KUBE_E2E_FILE_SECRET="+kubeFileSecret,
		"TOK_ALICE=alice-token-0123456789abcdef", "TOK_BOB=bob-token-0123456789abcdef")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mcpbox pin: %v\n%s", err, out)
	}
	lock, err := os.ReadFile(filepath.Join(e.dir, "mcpbox.lock"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(lock), "echo") {
		t.Errorf("mcpbox.lock has no tool echo:\n%s", lock)
	}
	e.waitPods(t, 0, 60*time.Second)
	var owners corev1.ConfigMapList
	if err := e.client.List(ctx, kube.ConfigMaps, e.ns, kube.LabelRole+"="+kube.RoleOwner, &owners); err != nil {
		t.Fatal(err)
	}
	if len(owners.Items) != 0 {
		t.Errorf("%d owner objects left after pin", len(owners.Items))
	}
}

// TestKubeInputClaim: backend.input_claim mounts an existing claim
// read-only at /workspace/input: the server reads its files and cannot
// write there, while /workspace/output is writable.
func TestKubeInputClaim(t *testing.T) {
	e := kubeSetup(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "inputs"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}},
	}
	if err := e.client.Create(ctx, kube.PVCs, e.ns, pvc, nil); err != nil {
		t.Fatal(err)
	}
	dir := e.cluster.Node.PVCDir(e.ns, "inputs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the claim"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	b, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["servers"].(map[string]any)["k"].(map[string]any)["backend"] = map[string]any{"input_claim": "inputs"}
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	g := e.serve(t)
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	gwMustCall(t, alice, "fs_read", map[string]any{"path": "/workspace/input/hello.txt"}, "hello from the claim")
	if got, err := gwCall(ctx, alice, "fs_write", map[string]any{"path": "/workspace/input/evil.txt", "text": "x"}); err == nil {
		t.Errorf("writing the read-only input succeeded: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "evil.txt")); err == nil {
		t.Error("the write reached the claim")
	}
	gwMustCall(t, alice, "fs_write", map[string]any{"path": "/workspace/output/ok.txt", "text": "fine"}, "")
}
