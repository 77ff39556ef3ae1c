package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.yaml.in/yaml/v3"

	"mcpbox/internal/kube"
	"mcpbox/internal/kube/kubetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// clusterClient returns the package's shared control plane, an admin
// client of package kube and a namespace of the test's own.
func clusterClient(t *testing.T) (*kubetest.Cluster, *kube.Client, string) {
	t.Helper()
	cl := kubetest.Shared(t)
	c := clientFor(t, cl.Kubeconfig)
	ns := kube.LabelValue(fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()), 40)
	cl.CreateNamespace(t, ns)
	return cl, c, ns
}

func clientFor(t *testing.T, kubeconfig string) *kube.Client {
	t.Helper()
	cfg, err := kube.LoadKubeconfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestObjectsOnAPIServer creates a server's objects through the real API
// server and reads them back: the hardening survives admission and
// defaulting, every object has the labels and the owner reference, and
// deleting the owner lets the garbage collector delete them all.
func TestObjectsOnAPIServer(t *testing.T) {
	_, c, ns := clusterClient(t)
	ctx := ctxT(t, 2*time.Minute)
	gw, err := kube.Register(ctx, c, ns, "gw1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Abandon)
	ref := gw.Ref()
	pod := kube.Pod(kube.PodOptions{Name: "p1", Gateway: "gw1", Server: "srv", Scope: kube.ScopeHash("a"), Owner: ref,
		Image: "x", Command: kube.AgentCommand("/mcpbox", []string{"srv"}), TLSSecret: "p1-tls",
		Limits: kube.Limits{CPU: 0.25, Memory: 128 << 20, EphemeralStorage: 256 << 20}, Output: true, OutputSize: 1 << 20})
	var got corev1.Pod
	if err := c.Create(ctx, kube.Pods, ns, pod, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, kube.Secrets, ns, kube.PodTLS("p1-tls", "gw1", "srv", ref, []byte("c"), []byte("k"), []byte("ca")), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, kube.NetworkPolicies, ns, kube.NetworkPolicy(kube.PolicyOptions{Gateway: "gw1", Server: "srv", Owner: ref}), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, kube.Pods, ns, "p1", &got); err != nil {
		t.Fatal(err)
	}
	sc := got.Spec.Containers[0].SecurityContext
	switch {
	case *got.Spec.AutomountServiceAccountToken:
		t.Error("token automount on after admission")
	case !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
		t.Errorf("container security context after admission: %+v", sc)
	case !*got.Spec.SecurityContext.RunAsNonRoot || *got.Spec.SecurityContext.RunAsUser == 0:
		t.Errorf("pod security context after admission: %+v", got.Spec.SecurityContext)
	case sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("seccomp profile lost")
	}
	for _, v := range got.Spec.Volumes {
		if v.Projected != nil {
			t.Errorf("a projected volume (a token?) was added: %s", v.Name)
		}
	}
	var np networkingv1.NetworkPolicyList
	if err := c.List(ctx, kube.NetworkPolicies, ns, kube.Selector("gw1", ""), &np); err != nil {
		t.Fatal(err)
	}
	if len(np.Items) != 1 || len(np.Items[0].Spec.Egress) != 0 || len(np.Items[0].Spec.PolicyTypes) != 2 {
		t.Fatalf("network policies %+v", np.Items)
	}
	// Every object of the gateway: labelled and owned.
	for _, r := range []kube.Resource{kube.Pods, kube.Secrets, kube.NetworkPolicies, kube.Leases} {
		var list struct {
			Items []metav1.PartialObjectMetadata `json:"items"`
		}
		if err := c.List(ctx, r, ns, kube.Selector("gw1", ""), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 0 {
			t.Errorf("%s: none labelled for the gateway", r.Plural)
		}
		for _, o := range list.Items {
			if len(o.OwnerReferences) != 1 || o.OwnerReferences[0].UID != gw.Owner.UID {
				t.Errorf("%s %s: owner references %v", r.Plural, o.Name, o.OwnerReferences)
			}
			if o.Labels[kube.LabelManagedBy] != "mcpbox" {
				t.Errorf("%s %s: labels %v", r.Plural, o.Name, o.Labels)
			}
		}
	}
	// Deleting the owner collects everything.
	if err := gw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, ns, "gw1", 60*time.Second)
}

// waitGone waits until no pod, secret, network policy or lease of
// gateway is left.
func waitGone(t *testing.T, c *kube.Client, ns, gateway string, d time.Duration) {
	t.Helper()
	ctx := ctxT(t, d)
	for {
		left := []string{}
		for _, r := range []kube.Resource{kube.Pods, kube.Secrets, kube.NetworkPolicies, kube.Leases, kube.ConfigMaps} {
			var list struct {
				Items []json.RawMessage `json:"items"`
			}
			if err := c.List(ctx, r, ns, kube.Selector(gateway, ""), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) > 0 {
				left = append(left, r.Plural)
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("objects of gateway %s left after %s: %s", gateway, d, strings.Join(left, ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestCollectExpired: a gateway that stops renewing (a crash) is
// collected by the next one once its lease expired; a live one is not.
func TestCollectExpired(t *testing.T) {
	_, c, ns := clusterClient(t)
	ctx := ctxT(t, 2*time.Minute)
	dead, err := kube.Register(ctx, c, ns, "dead", 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	dead.Abandon()
	live, err := kube.Register(ctx, c, ns, "live", 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close(context.Background()) })
	if err := c.Create(ctx, kube.Pods, ns, kube.Pod(kube.PodOptions{Name: "orphan", Gateway: "dead", Server: "s",
		Owner: dead.Ref(), Image: "x", Command: []string{"x"}, TLSSecret: "none"}), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := kube.CollectExpired(ctx, c, ns, time.Now()); err != nil || len(got) != 0 {
		t.Fatalf("collected %v (%v) before the lease expired", got, err)
	}
	time.Sleep(3 * time.Second) // the live one renews every 2s/3
	got, err := kube.CollectExpired(ctx, c, ns, time.Now())
	if err != nil || len(got) != 1 || got[0] != "dead" {
		t.Fatalf("collected %v (%v), want [dead]", got, err)
	}
	waitGone(t, c, ns, "dead", 60*time.Second)
	var l coordinationv1.Lease
	if err := c.Get(ctx, kube.Leases, ns, kube.LeaseName("live"), &l); err != nil {
		t.Fatalf("the live gateway's lease: %v", err)
	}
}

// TestLostRegistration: a gateway whose lease another gateway deleted
// (after it lapsed: the API out of reach) says so (Err, and its warn
// hook) instead of going on as if its objects were there.
func TestLostRegistration(t *testing.T) {
	_, c, ns := clusterClient(t)
	ctx := ctxT(t, time.Minute)
	var mu sync.Mutex
	var warned []string
	gw, err := kube.Register(ctx, c, ns, "lost", 2*time.Second, func(msg string, err error) {
		mu.Lock()
		warned = append(warned, fmt.Sprint(msg, ": ", err))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close(context.Background()) })
	if err := gw.Err(); err != nil {
		t.Fatalf("a fresh registration: %v", err)
	}
	if err := c.Delete(ctx, kube.Leases, ns, kube.LeaseName("lost")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for gw.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not notice its lease was deleted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(gw.Err().Error(), "restart mcpbox serve") {
		t.Errorf("Err() = %v", gw.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warned) == 0 || !strings.Contains(warned[len(warned)-1], "lease is gone") {
		t.Errorf("warned %q", warned)
	}
}

// TestRBACSuffices: a user bound to exactly the Role of RBAC can do all
// the backend does and doctor finds nothing missing; without it, doctor
// reports the permissions missing and a create is forbidden.
func TestRBACSuffices(t *testing.T) {
	cl, admin, ns := clusterClient(t)
	ctx := ctxT(t, 3*time.Minute)
	user := clientFor(t, cl.UserKubeconfig(t, "gateway"))
	checks := kube.Doctor(ctx, user, ns, "", nil)
	if ok(checks, "rbac") {
		t.Fatalf("a user with no role passed the RBAC check: %+v", checks)
	}
	if !slices.ContainsFunc(checks, func(c kube.Check) bool {
		return strings.Contains(c.Detail, "`mcpbox kube rbac --config FILE --subject gateway`")
	}) {
		t.Errorf("doctor's hint does not bind the user it ran as: %+v", checks)
	}
	if _, err := kube.Register(ctx, user, ns, "nope", 0, nil); !kube.IsForbidden(err) {
		t.Fatalf("register without the role: %v, want forbidden", err)
	}
	// Apply exactly what `mcpbox kube rbac` prints.
	y, err := kube.RBAC(ns, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(y), "---\n")
	if len(docs) != 2 {
		t.Fatalf("RBAC printed %d documents", len(docs))
	}
	for i, plural := range []string{"roles", "rolebindings"} {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(docs[i]), &obj); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, kube.Resource{API: "/apis/rbac.authorization.k8s.io/v1", Plural: plural}, ns, obj, nil); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC caches settle within a moment.
	deadline := time.Now().Add(20 * time.Second)
	for checks = kube.Doctor(ctx, user, ns, "", nil); !ok(checks, "rbac") && time.Now().Before(deadline); checks = kube.Doctor(ctx, user, ns, "", nil) {
		time.Sleep(200 * time.Millisecond)
	}
	for _, ch := range checks {
		if !ch.OK {
			t.Errorf("doctor with the role: %s: %s", ch.Name, ch.Detail)
		}
	}
	// Everything the backend does, as that user.
	gw, err := kube.Register(ctx, user, ns, "gw", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := user.Create(ctx, kube.NetworkPolicies, ns, kube.NetworkPolicy(kube.PolicyOptions{Gateway: "gw", Server: "s", Owner: gw.Ref()}), nil); err != nil {
		t.Fatal(err)
	}
	if err := user.Create(ctx, kube.Secrets, ns, kube.PodTLS("p-tls", "gw", "s", gw.Ref(), []byte("c"), []byte("k"), []byte("ca")), nil); err != nil {
		t.Fatal(err)
	}
	po := kube.PodOptions{Name: "p", Gateway: "gw", Server: "s", Owner: gw.Ref(), Image: "x",
		Command: []string{"/bin/sh", "-c", "echo hello-log; exec sleep 60"}, TLSSecret: "p-tls"}
	if err := user.Create(ctx, kube.Pods, ns, kube.Pod(po), nil); err != nil {
		t.Fatal(err)
	}
	p, err := user.WatchPod(ctx, ns, "p", func(p *corev1.Pod) (bool, error) { return p.Status.PodIP != "", nil })
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.PodIP == "" {
		t.Fatal("no pod IP")
	}
	// Following a pod's log (the egress proxy's decisions) through the
	// API server and the node's kubelet.
	lines := make(chan string, 10)
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	var logErr error
	var logMu sync.Mutex
	go user.FollowLogs(fctx, kube.FollowOptions{Namespace: ns, Selector: kube.Selector("gw", kube.RoleServer),
		Container: p.Spec.Containers[0].Name, Relist: 200 * time.Millisecond,
		Line:   func(pod string, b []byte) { lines <- pod + ": " + string(b) },
		Errors: func(pod string, err error) { logMu.Lock(); logErr = err; logMu.Unlock() }})
	select {
	case l := <-lines:
		if l != "p: hello-log" {
			t.Errorf("followed log line %q, want %q", l, "p: hello-log")
		}
	case <-fctx.Done():
		logMu.Lock()
		t.Errorf("no line of the pod's log in 30s (last error: %v)", logErr)
		logMu.Unlock()
	}
	fcancel()
	if err := user.Delete(ctx, kube.Pods, ns, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CollectExpired(ctx, user, ns, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// What the role does not give: reading secrets.
	if err := user.Get(ctx, kube.Secrets, ns, "p-tls", nil); !kube.IsForbidden(err) {
		t.Errorf("reading a secret with the role: %v, want forbidden", err)
	}
}

func ok(checks []kube.Check, name string) bool {
	for _, c := range checks {
		if c.Name == name {
			return c.OK
		}
	}
	return false
}

// TestDoctorNamespace: doctor says a namespace nobody created does not
// exist (access reviews alone would pass it), and leaves nothing behind
// in one that does.
func TestDoctorNamespace(t *testing.T) {
	_, admin, ns := clusterClient(t)
	ctx := ctxT(t, time.Minute)
	if checks := kube.Doctor(ctx, admin, ns, "", nil); !ok(checks, "namespace") {
		t.Fatalf("doctor on the existing namespace %s: %+v", ns, checks)
	}
	var cms struct{ Items []any }
	if err := admin.List(ctx, kube.ConfigMaps, ns, "", &cms); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if name, _ := cm.(map[string]any)["metadata"].(map[string]any)["name"].(string); strings.HasPrefix(name, "mcpbox-doctor-") {
			t.Fatalf("doctor's dry run created %s", name)
		}
	}
	missing := ns + "-missing"
	checks := kube.Doctor(ctx, admin, missing, "", nil)
	if ok(checks, "namespace") {
		t.Fatalf("doctor passed the namespace %s, which does not exist: %+v", missing, checks)
	}
	for _, c := range checks {
		if c.Name == "namespace" && !strings.Contains(c.Detail, "does not exist") {
			t.Fatalf("the namespace check says %q, want that it does not exist", c.Detail)
		}
	}
}

// applyRBAC creates, as admin, the Role and RoleBinding RBAC prints for
// subject in ns with get on secrets.
func applyRBAC(t *testing.T, ctx context.Context, admin *kube.Client, ns, subject string, secrets ...string) {
	t.Helper()
	y, err := kube.RBAC(ns, subject, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	for i, plural := range []string{"roles", "rolebindings"} {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(strings.Split(string(y), "---\n")[i]), &obj); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, kube.Resource{API: "/apis/rbac.authorization.k8s.io/v1", Plural: plural}, ns, obj, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSecretKeyRBAC: a gateway reads a key of an existing Secret only
// when its Role names that Secret: without the name the read is
// forbidden (and doctor says so), with it the value comes back, another
// Secret stays forbidden, and a missing Secret or key is a clear error.
func TestSecretKeyRBAC(t *testing.T) {
	cl, admin, ns := clusterClient(t)
	ctx := ctxT(t, 2*time.Minute)
	const value = "gh-token-from-a-secret-0123456789"
	for name, v := range map[string]string{"gh": value, "other": "other-value-0123456789"} {
		s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"token": []byte(v)}}
		if err := admin.Create(ctx, kube.Secrets, ns, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	refs := []kube.SecretKeyRef{{Name: "gh", Key: "token"}}

	// A Role without the Secret's name: forbidden, fail closed.
	plain := clientFor(t, cl.UserKubeconfig(t, "plain"))
	applyRBAC(t, ctx, admin, ns, "plain")
	waitFor(t, 20*time.Second, func() bool { ok, _ := plain.CanI(ctx, ns, "", "pods", "create"); return ok })
	if v, err := plain.SecretKey(ctx, ns, "gh", "token"); err == nil || !strings.Contains(err.Error(), "may not read it (403 forbidden)") || v != nil {
		t.Errorf("reading gh without get on it: %q, %v; want forbidden", v, err)
	}
	checks := kube.Doctor(ctx, plain, ns, "", refs)
	if ok(checks, "rbac") || ok(checks, "secret") || !strings.Contains(detail(checks, "rbac"), "get secrets gh") {
		t.Errorf("doctor without get on gh: %+v", checks)
	}

	// The Role of a config that names gh (and a Secret nobody made),
	// applied in its place.
	for _, plural := range []string{"roles", "rolebindings"} {
		if err := admin.Delete(ctx, kube.Resource{API: "/apis/rbac.authorization.k8s.io/v1", Plural: plural}, ns, "mcpbox-gateway"); err != nil {
			t.Fatal(err)
		}
	}
	named := plain
	applyRBAC(t, ctx, admin, ns, "plain", "gh", "missing")
	var got []byte
	waitFor(t, 20*time.Second, func() bool {
		v, err := named.SecretKey(ctx, ns, "gh", "token")
		got = v
		return err == nil
	})
	if string(got) != value {
		t.Errorf("gh/token = %q, want %q", got, value)
	}
	for _, tc := range []struct{ name, key, want string }{
		{"other", "token", "may not read it"},
		{"gh", "nokey", `has no key "nokey" (its keys: token)`},
		{"missing", "token", "does not exist"},
	} {
		if _, err := named.SecretKey(ctx, ns, tc.name, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s/%s: %v, want one line with %q", tc.name, tc.key, err, tc.want)
		}
	}
	for _, ch := range kube.Doctor(ctx, named, ns, "", refs) {
		if !ch.OK {
			t.Errorf("doctor with get on gh: %s: %s", ch.Name, ch.Detail)
		}
	}
	if checks := kube.Doctor(ctx, named, ns, "", []kube.SecretKeyRef{{Name: "gh", Key: "nokey"}}); ok(checks, "secret") {
		t.Errorf("doctor passed a missing key: %+v", checks)
	}
}

func detail(checks []kube.Check, name string) string {
	for _, c := range checks {
		if c.Name == name {
			return c.Detail
		}
	}
	return ""
}

// waitFor polls cond (RBAC caches settle within a moment) until it holds
// or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", d)
		}
	}
}
