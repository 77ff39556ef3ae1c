package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"mcpbox/internal/kube"
	"mcpbox/internal/kube/egressproxy"
	"mcpbox/internal/kube/kubetest"
)

// kubeEgressAudit: the gateway followed the proxy pods' logs into its
// audit: k's pod's allowed fetch of portA and its refused one of portB
// are egress records of server k, the call's client and sandbox (the
// scope is the agent's: a local sandbox's egress names no session either), each inside the time of a k__http_get call record of that
// sandbox (the join a local sandbox's egress has); in the database (`mcpbox
// logs`) and the JSONL mirror alike. None names a pod other than k's.
func kubeEgressAudit(t *testing.T, e *kubeEnv, podK string, portA, portB int) {
	t.Helper()
	m := mode{uid: -1}
	var egressRecs []auRecord
	found := func() (allow, deny bool) {
		for _, r := range egressRecs {
			for _, d := range r.list("domains") {
				port := fmt.Sprint(d["port"])
				allow = allow || r.str("decision") == "allow" && port == fmt.Sprint(portA) && d["bytes_down"] != nil
				deny = deny || r.str("decision") == "deny" && port == fmt.Sprint(portB) && strings.Contains(fmt.Sprint(r["detail"]), "no rule allows")
			}
		}
		return
	}
	// The proxy's lines reach the gateway a moment after the fact.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		r := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", e.config, "--event", "egress", "--server", "k")
		if r.code != 0 {
			t.Fatalf("mcpbox logs: %s", r)
		}
		egressRecs = auDecode(t, r.stdout)
		if a, d := found(); a && d || time.Now().After(deadline) {
			break
		}
	}
	if a, d := found(); !a || !d {
		t.Fatalf("the audit lacks k's allowed (%v) or refused (%v) egress: %v", a, d, egressRecs)
	}
	r := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", e.config, "--event", "call", "--server", "k")
	if r.code != 0 {
		t.Fatalf("mcpbox logs: %s", r)
	}
	calls := auDecode(t, r.stdout)
	jsonl, err := os.ReadFile(filepath.Join(e.dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	inJSONL := map[string]bool{}
	for _, rec := range auDecode(t, string(jsonl)) {
		inJSONL[rec.str("hash")] = true
	}
	for _, eg := range egressRecs {
		if eg.str("client") != "alice" || !strings.HasPrefix(eg.str("sandbox"), "sbx_") {
			t.Errorf("egress record without alice's sandbox: %v", eg)
		}
		if !inJSONL[eg.str("hash")] {
			t.Errorf("egress record %v is not in the JSONL mirror", eg)
		}
		at, _ := time.Parse(time.RFC3339Nano, eg.str("time"))
		var joined bool
		for _, c := range calls {
			ct, _ := time.Parse(time.RFC3339Nano, c.str("time"))
			end := ct.Add(time.Duration(c.num("duration_ms") * float64(time.Millisecond)))
			joined = joined || c.str("tool") == "http_get" && c.str("sandbox") == eg.str("sandbox") &&
				c.str("client") == eg.str("client") && !at.Before(ct) && !at.After(end)
		}
		if !joined {
			t.Errorf("egress record %v joins no k__http_get call record of its sandbox:\n%v", eg, calls)
		}
	}
	// Every egress record of the audit is one of the two servers' pods'.
	r = m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", e.config, "--event", "egress")
	for _, eg := range auDecode(t, r.stdout) {
		if s := eg.str("server"); s != "k" && s != "j" {
			t.Errorf("an egress record of server %q: %v", s, eg)
		}
	}
	t.Logf("%d egress records of k's pod %s joined to its calls", len(egressRecs), podK)
}

// TestKubeEgress: a server in a pod with network.egress reaches its
// allowed host through the gateway's egress proxy (a Deployment the
// gateway made, reached at its Service's address with the pod's token)
// and is refused another port, the metadata address and a private one;
// a second server's pod gets its own allowlist through the same proxy;
// each decision is a JSON line in the proxy's log naming the server and
// the pod; the proxy variables are in no pod object (they come over the
// agent's start request); the server's NetworkPolicy lets it out only to
// the proxy's pods, the proxy's admits only server pods; the gateway's
// stop takes the proxy away.
//
// The test node shares the host's network, so nothing here shows that
// the NetworkPolicy holds (kubetest enforces none) or that a pod cannot
// bypass the proxy: the proxy's own decisions and the objects are what
// is checked. The proxy binds the host's port 3128 (its Service's
// cluster IP is a loopback address); the second replica cannot bind it
// and restarts, which the first one serving does not notice.
func TestKubeEgress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Errorf("the target saw Proxy-Authorization")
		}
		io.WriteString(w, "allowed-body")
	}))
	defer allowed.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "other-body")
	}))
	defer other.Close()
	portA := allowed.Listener.Addr().(*net.TCPAddr).Port
	portB := other.Listener.Addr().(*net.TCPAddr).Port

	k := kubeCluster(t)
	cluster, client, ns, dir := k.cluster, k.client, k.ns, k.dir
	agent, server := kubeBins(t)
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(dir, "state"), "audit": map[string]string{"jsonl": filepath.Join(dir, "audit.jsonl")},
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": ns, "kubeconfig": cluster.Kubeconfig,
			"agent_path": agent, "image": "mcpbox.test/base:1"},
		"servers": map[string]any{"k": map[string]any{
			"command": []string{server, "-name", "k"},
			"tools":   map[string]any{"allow": []string{"*"}},
			// Any host on port 80, which still leaves out the internal
			// ranges; the test's loopback server by name.
			"network": map[string]any{"egress": []map[string]any{{"host": "127.0.0.1", "ports": []int{portA}}, {"host": "*", "ports": []int{80}}}},
		}, "j": map[string]any{
			// Another server: the other port only.
			"command": []string{server, "-name", "j"},
			"tools":   map[string]any{"allow": []string{"*"}},
			"network": map[string]any{"egress": []map[string]any{{"host": "127.0.0.1", "ports": []int{portB}}}},
		}},
	}
	e := &kubeEnv{cluster: cluster, client: client, ns: ns, dir: dir}
	e.writeConfig(t, c)
	g := e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dumpPods := func() {
		// What the pods said, for a failure.
		var l corev1.PodList
		client.List(context.Background(), kube.Pods, ns, "", &l)
		for _, p := range l.Items {
			for _, c := range p.Spec.Containers {
				out, err := cluster.Node.Logs(ns, p.Name, c.Name)
				t.Logf("pod %s container %s (%s): %v\n%s", p.Name, c.Name, p.Status.Phase, err, out)
			}
		}
	}
	alice, err := gwConnectErr(ctx, g.url, &http.Client{Transport: gwBearer{token: "alice-token-0123456789abcdef", base: gwHTTP.Transport}}, nil, gwLegacy)
	if err != nil {
		dumpPods()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods()
		}
	})

	// The first pod with egress waits for a proxy pod to be available;
	// a few tries more cover the moment between its Ready and its listen.
	urlA := fmt.Sprintf("http://127.0.0.1:%d/a", portA)
	var got string
	tries := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		tries++
		got, err = gwCall(ctx, alice, "k__http_get", map[string]any{"url": urlA})
		if err == nil && strings.HasPrefix(got, "200 ") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || got != "200 allowed-body" {
		t.Fatalf("http_get of the allowed URL = %q, %v (%d tries)", got, err, tries)
	}
	t.Logf("the allowed URL answered on try %d", tries)
	for _, tc := range []struct{ url, want string }{
		{fmt.Sprintf("http://127.0.0.1:%d/b", portB), "403 mcpbox egress: no rule allows 127.0.0.1:" + fmt.Sprint(portB)},
		{"http://169.254.169.254/latest/meta-data/", "403 mcpbox egress: blocked link-local"},
		{"http://10.0.0.1/", "403 mcpbox egress: blocked private"},
	} {
		if got, err := gwCall(ctx, alice, "k__http_get", map[string]any{"url": tc.url}); err != nil || !strings.HasPrefix(got, tc.want) {
			t.Errorf("k: http_get %s = %q, %v; want %q", tc.url, got, err, tc.want)
		}
	}
	// Server j's pod, through the same proxy, gets j's allowlist: the
	// port k was refused, and not k's.
	urlB := fmt.Sprintf("http://127.0.0.1:%d/b", portB)
	if got, err := gwCall(ctx, alice, "j__http_get", map[string]any{"url": urlB}); err != nil || got != "200 other-body" {
		t.Errorf("j: http_get %s = %q, %v", urlB, got, err)
	}
	if got, err := gwCall(ctx, alice, "j__http_get", map[string]any{"url": urlA}); err != nil ||
		!strings.HasPrefix(got, "403 mcpbox egress: no rule allows 127.0.0.1:"+fmt.Sprint(portA)) {
		t.Errorf("j: http_get %s = %q, %v", urlA, got, err)
	}

	// The objects: the proxy's Deployment, Service and Secret, owned by
	// the gateway's owner; the server's pod's policy lets it out to the
	// proxy's pods only; the pod's spec has no proxy variables.
	var pods corev1.PodList
	if err := client.List(ctx, kube.Pods, ns, kube.LabelManagedBy+"="+kube.ManagedBy, &pods); err != nil {
		t.Fatal(err)
	}
	var servers, proxies []corev1.Pod
	for _, p := range pods.Items {
		switch p.Labels[kube.LabelRole] {
		case kube.RoleServer:
			servers = append(servers, p)
		case kube.RoleEgress:
			proxies = append(proxies, p)
		}
	}
	if len(servers) != 2 || len(proxies) == 0 {
		t.Fatalf("%d server pods, %d proxy pods", len(servers), len(proxies))
	}
	podOf := map[string]string{} // server → its pod
	for _, p := range servers {
		podOf[p.Labels[kube.LabelServer]] = p.Name
	}
	pod := servers[0]
	raw, _ := json.Marshal(pods.Items)
	if strings.Contains(string(raw), "HTTP_PROXY") || strings.Contains(string(raw), ":v1.") {
		t.Error("a pod object holds the proxy variables")
	}
	gw := pod.Labels[kube.LabelGateway]
	owner := pod.OwnerReferences[0].UID
	var dep appsv1.Deployment
	var svc corev1.Service
	if err := client.Get(ctx, kube.Deployments, ns, kube.ProxyName(gw), &dep); err != nil {
		t.Fatal(err)
	}
	if err := client.Get(ctx, kube.Services, ns, kube.ProxyName(gw), &svc); err != nil {
		t.Fatal(err)
	}
	if dep.OwnerReferences[0].UID != owner || svc.OwnerReferences[0].UID != owner {
		t.Errorf("the proxy's owners: %v %v, want %s", dep.OwnerReferences, svc.OwnerReferences, owner)
	}
	var nps networkingv1.NetworkPolicyList
	if err := client.List(ctx, kube.NetworkPolicies, ns, kube.LabelManagedBy+"="+kube.ManagedBy, &nps); err != nil {
		t.Fatal(err)
	}
	for _, np := range nps.Items {
		switch np.Labels[kube.LabelRole] {
		case kube.RoleServer:
			eg := np.Spec.Egress
			if len(eg) != 1 || len(eg[0].To) != 1 || eg[0].To[0].PodSelector.MatchLabels[kube.LabelRole] != kube.RoleEgress ||
				eg[0].Ports[0].Port.IntValue() != kube.ProxyPort {
				t.Errorf("the server's egress policy: %+v", eg)
			}
		case kube.RoleEgress:
			if in := np.Spec.Ingress; len(in) != 1 || in[0].From[0].PodSelector.MatchLabels[kube.LabelRole] != kube.RoleServer {
				t.Errorf("the proxy's ingress policy: %+v", in)
			}
		}
	}
	if len(nps.Items) != 3 {
		t.Errorf("%d network policies, want the two servers' and the proxy's", len(nps.Items))
	}

	// The decision log: the serving proxy pod's stdout.
	var lines []egressproxy.Line
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		lines = lines[:0]
		for _, p := range proxies {
			out, _ := cluster.Node.Logs(ns, p.Name, "proxy")
			for _, s := range strings.Split(out, "\n") {
				var ln egressproxy.Line
				if json.Unmarshal([]byte(s), &ln) == nil && ln.Decision != "" {
					lines = append(lines, ln)
				}
			}
		}
		if len(lines) >= 6 {
			break
		}
	}
	// Each server's pod: its allowed port allowed, the other's refused.
	for srv, ports := range map[string][2]int{"k": {portA, portB}, "j": {portB, portA}} {
		var allow, deny bool
		for _, ln := range lines {
			if ln.Server != srv || ln.Pod != podOf[srv] {
				continue
			}
			allow = allow || ln.Decision == "allow" && ln.Port == ports[0] && ln.BytesDown > 0
			deny = deny || ln.Decision == "deny" && ln.Port == ports[1] && strings.Contains(ln.Reason, "no rule allows")
		}
		if !allow || !deny {
			t.Errorf("the proxy's log lacks the allow (%v) or the deny (%v) of %s's pod %s: %+v", allow, deny, srv, podOf[srv], lines)
		}
	}

	kubeEgressAudit(t, e, podOf["k"], portA, portB)

	// The gateway's stop deletes its owner: the proxy goes with it.
	gwClose(t, alice)
	g.stop(t)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		err := client.Get(ctx, kube.Deployments, ns, kube.ProxyName(gw), &dep)
		if kube.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy's Deployment is still there after the gateway stopped: %v", err)
		}
	}
}

// awaitProxyPort waits (bounded) until the host's ports 3128 and 3129
// are free: the test node's egress proxy pods bind them (the proxy and
// its registration port, on every address), and those of a test that
// just ended go only once the garbage collector has deleted them.
// Anything else holding a port skips the test.
func awaitProxyPort(t *testing.T) {
	t.Helper()
	awaitNoProxyReplicas(t)
	var err error
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		var l, l2 net.Listener
		if l, err = net.Listen("tcp", ":3128"); err == nil {
			l2, err = net.Listen("tcp", ":3129")
			l.Close()
			if err == nil {
				l2.Close()
				return
			}
		}
	}
	t.Skipf("port 3128 or 3129 is taken on this host (the test proxy binds them): %v", err)
}

// awaitNoProxyReplicas waits (bounded) until no egress proxy ReplicaSet
// or pod of an earlier test is left in the shared cluster. While the
// garbage collector deletes a stopped gateway's objects, its ReplicaSet
// can still start a replica (one a test killed, say), which would bind
// the test node's proxy ports after awaitProxyPort saw them free and
// answer the next gateway's pods with another gateway's key (407).
func awaitNoProxyReplicas(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		return // no test node: nothing of ours can hold the ports
	}
	c := kubetest.Shared(t)
	cfg, err := kube.LoadKubeconfig(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sel := kube.LabelRole + "=" + kube.RoleEgress
	allRS := kube.Resource{API: "/apis/apps/v1", Plural: "replicasets", Cluster: true}
	allPods := kube.Resource{API: "/api/v1", Plural: "pods", Cluster: true}
	var left int
	for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var rs appsv1.ReplicaSetList
		var pods corev1.PodList
		err = cl.List(ctx, allRS, "", sel, &rs)
		if err == nil {
			err = cl.List(ctx, allPods, "", sel, &pods)
		}
		cancel()
		if left = len(rs.Items) + len(pods.Items); err == nil && left == 0 {
			return
		}
	}
	t.Skipf("an earlier test's egress proxy is still in the cluster after 90s (%d ReplicaSets and pods): %v", left, err)
}
