package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMain doubles as a container's program: with KUBETEST_HELPER=serve
// the test binary serves, on $POD_IP:8080, what the container sees.
func TestMain(m *testing.M) {
	if os.Getenv("KUBETEST_HELPER") == "serve" {
		serve()
		return
	}
	code := m.Run()
	StopShared()
	if shared.c != nil {
		if _, err := os.Stat(shared.c.Dir); err == nil {
			fmt.Fprintf(os.Stderr, "StopShared left %s\n", shared.c.Dir)
			code = 1
		}
	}
	os.Exit(code)
}

func TestShared(t *testing.T) {
	c := Shared(t)
	if c2 := Shared(t); c2 != c {
		t.Fatal("Shared started a second cluster")
	}
	t.Logf("shared cluster ready in %v", c.StartupTime)
	var sa corev1.ServiceAccount
	if err := c.Admin.Do(context.Background(), http.MethodGet, "/api/v1/namespaces/default/serviceaccounts/default", nil, &sa); err != nil {
		t.Fatal(err)
	}
}

// seen is what the helper container reports about itself.
type seen struct {
	Secret, PodIP, Name, Namespace, Hostname string
	WriteSecret                              string // the error writing into the secret volume
	WriteScratch                             string // the error writing into the emptyDir ("" if it worked)
	Claim                                    string // what the claim's directory holds
	Hidden                                   string // what the container sees of the cluster's directory
	PID                                      int
}

func serve() {
	ln, err := net.Listen("tcp", os.Getenv("POD_IP")+":8080")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		os.Exit(0)
	}()
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		secret, _ := os.ReadFile("/var/run/secrets/kubetest/token")
		claim, _ := os.ReadFile("/data/claim/note")
		host, _ := os.Hostname()
		var hidden []string
		entries, err := os.ReadDir(os.Getenv("KUBETEST_HIDDEN"))
		for _, e := range entries {
			hidden = append(hidden, e.Name())
		}
		if err != nil {
			hidden = append(hidden, err.Error())
		}
		_ = json.NewEncoder(w).Encode(seen{
			Secret: string(secret), PodIP: os.Getenv("POD_IP"), Name: os.Getenv("POD_NAME"),
			Namespace: os.Getenv("POD_NAMESPACE"), Hostname: host,
			WriteSecret:  errText(os.WriteFile("/var/run/secrets/kubetest/token", []byte("x"), 0o600)),
			WriteScratch: errText(os.WriteFile("/scratch/f", []byte("x"), 0o600)),
			Claim:        string(claim), PID: os.Getpid(), Hidden: strings.Join(hidden, " "),
		})
	}))
}

func TestVersionsMatchScript(t *testing.T) {
	script, err := os.ReadFile("../../../scripts/kube-bins.sh")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"MCPBOX_KUBE_VERSION": KubeVersion, "MCPBOX_ETCD_VERSION": EtcdVersion} {
		m := regexp.MustCompile(name + `:-(v[0-9.]+)`).FindSubmatch(script)
		if m == nil || string(m[1]) != want {
			t.Errorf("scripts/kube-bins.sh builds %s %q by default, kubetest looks for %q", name, m, want)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{
		"$(A)-$(B)": "1-two", "$(C)": "$(C)", "$$(A)": "$(A)", "a$b": "a$b", "$(A": "$(A", "$": "$", "x$$": "x$",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCluster(t *testing.T) {
	c := Start(t)
	t.Logf("cluster ready in %v", c.StartupTime)
	ctx := context.Background()
	var node corev1.Node
	if err := c.Admin.Do(ctx, http.MethodGet, "/api/v1/nodes/"+NodeName, nil, &node); err != nil {
		t.Fatal(err)
	}
	if len(node.Status.Conditions) == 0 || node.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("the test node is not Ready: %+v", node.Status.Conditions)
	}
	t.Run("pod", func(t *testing.T) { testPod(t, c) })
	t.Run("hardened", func(t *testing.T) { testHardened(t, c) })
	t.Run("ownerReferences", func(t *testing.T) { testOwnerReferences(t, c) })
	t.Run("deployment", func(t *testing.T) { testDeployment(t, c) })
	t.Run("rbac", func(t *testing.T) { testRBAC(t, c) })
	t.Run("restarts", func(t *testing.T) { testRestarts(t, c) })
}

func create(t *testing.T, c *Cluster, path string, obj any) {
	t.Helper()
	if err := c.Admin.Do(context.Background(), http.MethodPost, path, obj, nil); err != nil {
		t.Fatal(err)
	}
}

func randomText(t *testing.T) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// testPod runs the test binary as a server in a pod: it must reach Running
// with its own podIP, see its secret at the mount path (through the image's
// /var/run symlink), not be able to write there, and stop when deleted.
func testPod(t *testing.T, c *Cluster) {
	ctx := context.Background()
	ns := "pod-test"
	c.CreateNamespace(t, ns)
	token := randomText(t)
	create(t, c, "/api/v1/namespaces/"+ns+"/secrets", &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"token": []byte(token)},
	})
	create(t, c, "/api/v1/namespaces/"+ns+"/persistentvolumeclaims", &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "work"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
	if err := os.MkdirAll(c.Node.PVCDir(ns, "work"), 0o777); err != nil {
		t.Fatal(err)
	}
	note := randomText(t)
	if err := os.WriteFile(c.Node.PVCDir(ns, "work")+"/note", []byte(note), 0o644); err != nil {
		t.Fatal(err)
	}
	_, hostHad := os.Stat("/var/run/secrets/kubetest")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, "/api/v1/namespaces/"+ns+"/pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "srv"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name: "srv", Image: "mcpbox-test", Command: []string{exe},
				Env: []corev1.EnvVar{
					{Name: "KUBETEST_HELPER", Value: "serve"}, {Name: "KUBETEST_HIDDEN", Value: c.Dir},
					fieldEnv("POD_IP", "status.podIP"), fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "creds", MountPath: "/var/run/secrets/kubetest"},
					{Name: "scratch", MountPath: "/scratch"},
					{Name: "work", MountPath: "/data/claim"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "work"}}},
			},
		},
	})
	p := c.WaitPod(t, ns, "srv", 30*time.Second, func(p *corev1.Pod) bool {
		return p != nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	})
	ip := net.ParseIP(p.Status.PodIP)
	if ip == nil || !ip.IsLoopback() || ip.Equal(net.IPv4(127, 0, 0, 1)) || p.Spec.NodeName != NodeName {
		t.Fatalf("pod IP %q on node %q: want a loopback address of its own on %s", p.Status.PodIP, p.Spec.NodeName, NodeName)
	}
	var got seen
	url := "http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/"
	if err := poll(ctx, 50*time.Millisecond, 20*time.Second, func() (bool, error) {
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		return true, json.NewDecoder(resp.Body).Decode(&got)
	}); err != nil {
		logs, _ := c.Node.Logs(ns, "srv", "srv")
		t.Fatalf("the pod's server at %s: %v; its log:\n%s", url, err, logs)
	}
	if got.Secret != token || got.PodIP != p.Status.PodIP || got.Name != "srv" || got.Namespace != ns || got.Hostname != "srv" || got.Claim != note {
		t.Errorf("the container saw %+v; want secret %q, podIP %s, name srv, namespace %s, hostname srv, claim %q", got, token, p.Status.PodIP, ns, note)
	}
	if !strings.Contains(got.WriteSecret, "read-only file system") {
		t.Errorf("writing into the secret volume: %q, want a read-only file system", got.WriteSecret)
	}
	if got.WriteScratch != "" {
		t.Errorf("writing into the emptyDir: %s", got.WriteScratch)
	}
	if got.Hidden != "" {
		t.Errorf("the container sees the cluster's directory (keys, other pods' volumes): %q", got.Hidden)
	}
	if got.PID != 1 {
		t.Errorf("the container's process is pid %d of its namespace, want 1", got.PID)
	}
	if _, err := os.Stat("/var/run/secrets/kubetest"); hostHad != nil && err == nil {
		t.Errorf("the secret's mount point was made on the host's /var/run")
	}
	pid := c.Node.ContainerPID(ns, "srv", "srv")
	if pid == 0 {
		t.Fatal("no host PID for the running container")
	}
	begin := time.Now()
	if err := c.Admin.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+ns+"/pods/srv", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "srv", 20*time.Second, func(p *corev1.Pod) bool { return p == nil })
	t.Logf("pod deleted, stopped and removed in %v", time.Since(begin))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the container's process %d still exists after its pod was removed (kill 0: %v)", pid, err)
	}
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("the pod's server still answers at %s", url)
	}
	if _, err := c.Node.Logs(ns, "srv", "srv"); err != nil {
		t.Errorf("the log of a deleted pod: %v", err)
	}
}

// testHardened runs a container the way mcpbox's backend does (non-root,
// read-only root, no privilege escalation, no capabilities) and checks
// from inside that each holds; and a runAsNonRoot container that would
// run as root does not start.
func testHardened(t *testing.T, c *Cluster) {
	ns := "hardened"
	c.CreateNamespace(t, ns)
	uid := int64(65534)
	script := `id -u; id -g; touch /var/tmp/kubetest-ro 2>/dev/null && echo root-writable || echo root-read-only
grep -E '^(NoNewPrivs|CapBnd|CapEff):' /proc/self/status; echo tmp > /tmp/f && cat /tmp/f`
	create(t, c, "/api/v1/namespaces/"+ns+"/pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hard"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			RestartPolicy:                corev1.RestartPolicyNever,
			SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: &uid, RunAsGroup: &uid},
			Containers: []corev1.Container{{
				Name: "hard", Image: "mcpbox-test", Command: []string{"/bin/sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{
					ReadOnlyRootFilesystem: new(true), AllowPrivilegeEscalation: new(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	c.WaitPod(t, ns, "hard", 30*time.Second, func(p *corev1.Pod) bool {
		return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	logs, err := c.Node.Logs(ns, "hard", "hard")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"65534\n65534\n", "root-read-only", "NoNewPrivs:\t1", "CapBnd:\t0000000000000000", "CapEff:\t0000000000000000", "tmp\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the hardened container's output lacks %q:\n%s", want, logs)
		}
	}

	create(t, c, "/api/v1/namespaces/"+ns+"/pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			RestartPolicy:                corev1.RestartPolicyNever,
			SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: new(true)},
			Containers:                   []corev1.Container{{Name: "root", Image: "mcpbox-test", Command: []string{"/bin/true"}}},
		},
	})
	p := c.WaitPod(t, ns, "root", 30*time.Second, func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodFailed })
	if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || !strings.Contains(st[0].State.Terminated.Message, "runAsNonRoot") {
		t.Errorf("a runAsNonRoot container without a user: %+v, want a start error naming runAsNonRoot", st)
	}
}

// testOwnerReferences deletes an owner and expects the garbage collector
// to remove its dependents: a Secret and a running pod, whose process the
// test node must then stop.
func testOwnerReferences(t *testing.T, c *Cluster) {
	ctx := context.Background()
	ns := "gc"
	c.CreateNamespace(t, ns)
	var owner corev1.ConfigMap
	if err := c.Admin.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, &owner); err != nil {
		t.Fatal(err)
	}
	ref := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	create(t, c, "/api/v1/namespaces/"+ns+"/secrets", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: ref}})
	create(t, c, "/api/v1/namespaces/"+ns+"/pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: ref},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers:                   []corev1.Container{{Name: "loop", Image: "mcpbox-test", Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"}}},
		},
	})
	c.WaitPod(t, ns, "dep", 30*time.Second, func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning })
	pid := c.Node.ContainerPID(ns, "dep", "loop")
	if err := c.Admin.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+ns+"/configmaps/owner", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "dep", 60*time.Second, func(p *corev1.Pod) bool { return p == nil })
	if err := poll(ctx, 100*time.Millisecond, 30*time.Second, func() (bool, error) {
		return IsNotFound(c.Admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets/dep", nil, nil)), nil
	}); err != nil {
		t.Errorf("the dependent secret outlived its owner: %v", err)
	}
	if pid == 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		t.Errorf("the dependent pod's process %d outlived it", pid)
	}
}

// testDeployment runs a Deployment (the deployment and replicaset
// controllers make its pods), then deletes it: the garbage collector
// removes the ReplicaSet and the pods.
func testDeployment(t *testing.T, c *Cluster) {
	ctx := context.Background()
	ns := "deploy"
	c.CreateNamespace(t, ns)
	replicas := int32(2)
	begin := time.Now()
	labels := map[string]string{"app": "loop"}
	create(t, c, "/apis/apps/v1/namespaces/"+ns+"/deployments", &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "loop"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "loop", Image: "mcpbox-test", Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"}}},
				},
			},
		},
	})
	running := func() (int, int) {
		var list corev1.PodList
		if err := c.Admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods?labelSelector=app%3Dloop", nil, &list); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n, len(list.Items)
	}
	if err := poll(ctx, 100*time.Millisecond, 60*time.Second, func() (bool, error) {
		n, _ := running()
		return n == 2, nil
	}); err != nil {
		n, all := running()
		t.Fatalf("the deployment's pods: %d of %d running: %v", n, all, err)
	}
	t.Logf("2 replicas running after %v", time.Since(begin))
	begin = time.Now()
	bg := metav1.DeletePropagationBackground
	if err := c.Admin.Do(ctx, http.MethodDelete, "/apis/apps/v1/namespaces/"+ns+"/deployments/loop", &metav1.DeleteOptions{PropagationPolicy: &bg}, nil); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 100*time.Millisecond, 60*time.Second, func() (bool, error) {
		_, all := running()
		return all == 0, nil
	}); err != nil {
		t.Fatalf("the deployment's pods outlived it: %v", err)
	}
	t.Logf("pods collected %v after the deployment's deletion", time.Since(begin))
}

// testRBAC: a user with a client certificate but no role is forbidden;
// a RoleBinding lets it read pods in one namespace, and no more.
func testRBAC(t *testing.T, c *Cluster) {
	ctx := context.Background()
	ns := "rbac"
	c.CreateNamespace(t, ns)
	alice := c.UserClient(t, "alice")
	if err := alice.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods", nil, nil); !IsForbidden(err) {
		t.Fatalf("a user without roles listing pods: %v, want forbidden", err)
	}
	create(t, c, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/roles", &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	})
	create(t, c, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings", &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "alice"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
	})
	if err := poll(ctx, 50*time.Millisecond, 10*time.Second, func() (bool, error) {
		return alice.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods", nil, nil) == nil, nil
	}); err != nil {
		t.Fatalf("alice with pod-reader: %v", err)
	}
	if err := alice.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets", nil, nil); !IsForbidden(err) {
		t.Errorf("alice listing secrets: %v, want forbidden", err)
	}
	if err := alice.Do(ctx, http.MethodGet, "/api/v1/namespaces/default/pods", nil, nil); !IsForbidden(err) {
		t.Errorf("alice listing pods of another namespace: %v, want forbidden", err)
	}
	// The kubeconfig names the same kind of identity.
	kc, err := os.ReadFile(c.UserKubeconfig(t, "bob", "team"))
	if err != nil || !strings.Contains(string(kc), "client-certificate-data") || !strings.Contains(string(kc), c.Server) {
		t.Errorf("bob's kubeconfig: %v\n%s", err, kc)
	}
}

// testRestarts: an init container runs to completion first (its file is
// in the shared emptyDir), then a container that fails is restarted under
// restartPolicy OnFailure until it succeeds, and the pod ends Succeeded.
func testRestarts(t *testing.T, c *Cluster) {
	ns := "restarts"
	c.CreateNamespace(t, ns)
	mount := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	create(t, c, "/api/v1/namespaces/"+ns+"/pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "flaky"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			RestartPolicy:                corev1.RestartPolicyOnFailure,
			InitContainers: []corev1.Container{{Name: "init", Image: "mcpbox-test", VolumeMounts: mount,
				Command: []string{"/bin/sh", "-c", "echo from-init > /shared/init"}}},
			Containers: []corev1.Container{{Name: "main", Image: "mcpbox-test", VolumeMounts: mount,
				Command: []string{"/bin/sh", "-c", "cat /shared/init; echo run >> /shared/runs; [ $(wc -l < /shared/runs) -ge 2 ]"}}},
			Volumes: []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	p := c.WaitPod(t, ns, "flaky", 30*time.Second, func(p *corev1.Pod) bool {
		return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	if p.Status.Phase != corev1.PodSucceeded || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("the flaky pod ended %s", describePod(p))
	}
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
		t.Errorf("the first run's termination: %+v, want exit code 1", last)
	}
	logs, err := c.Node.Logs(ns, "flaky", "main")
	if err != nil || strings.Count(logs, "from-init") != 2 {
		t.Errorf("main's log %q (%v), want the init container's file read twice", logs, err)
	}
}
