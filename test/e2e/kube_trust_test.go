package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/kube"
)

// TestKubeInjectTrust: a pod whose server has secrets.T.inject trusts
// the interception CA at the image's system bundle paths too, not only
// through SSL_CERT_FILE and the like: its trust init container (on the
// server's image, the test node's host root without the agent, run by
// the agent that backend.agent_image copied in) wrote the image's own
// bundle followed by the CA, which the server sees at kube.TrustDir and
// over /etc/ssl/certs/ca-certificates.crt, Alpine's /etc/ssl/cert.pem and
// Fedora's ca-bundle.crt; a TLS client that trusts only one of those
// files (SSL_CERT_FILE ignored) reaches the HTTPS API through the proxy
// with the real token added. The control, a server without inject in the
// same gateway: its pod has no trust container, its system bundle is the
// image's own bytes, and the same client fails TLS (the API's CA is in
// no system bundle), the API seeing no request.
func TestKubeInjectTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	caPEM, cert := injCA(t)
	realT := injToken(t)
	api := injAPI(t, cert, realT)
	image, err := os.ReadFile(kube.SystemBundles[0]) // the test node's images are the host's root
	if err != nil {
		t.Skipf("the host has no %s: %v", kube.SystemBundles[0], err)
	}

	k := kubeCluster(t)
	agent, server := kubeBins(t)
	// k's image lacks the agent: the trust container runs the copy the
	// agent init container made (backend.agent_image).
	upstream := "mcpbox.test/trust-" + k.ns + ":1"
	k.cluster.Node.ImageWithout(upstream, agent)
	t.Cleanup(func() { k.cluster.Node.ImageWithout(upstream) })
	egress := []map[string]any{{"host": "127.0.0.1", "ports": []int{api.port}}}
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(k.dir, "state"),
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": k.ns, "kubeconfig": k.cluster.Kubeconfig,
			"agent_path": agent, "agent_image": "mcpbox.test/agent:1", "image": "mcpbox.test/base:1"},
		"servers": map[string]any{
			"k": map[string]any{"image": upstream, "args": []string{server, "-name", "k"}, "tools": map[string]any{"allow": []string{"*"}},
				"network": map[string]any{"egress": egress},
				"secrets": map[string]any{"T": map[string]any{"from": "env:INJ_T",
					"inject": map[string]any{"hosts": []string{fmt.Sprintf("127.0.0.1:%d", api.port)}, "header": "Authorization", "format": "Bearer {value}"}}}},
			"c": map[string]any{"command": []string{server, "-name", "c"}, "tools": map[string]any{"allow": []string{"*"}},
				"network": map[string]any{"egress": egress}},
		},
	}
	k.writeConfig(t, c)
	caFile := filepath.Join(k.dir, "upstream-ca.pem")
	if err := os.WriteFile(caFile, []byte(caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	k.keepLogs(t)
	g := gwServe(t, mode{uid: -1}, k.config, "TOK_ALICE=alice-token-0123456789abcdef", "INJ_T="+realT, "SSL_CERT_FILE="+caFile)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	call := kubeCaller(t, ctx, alice)
	apiURL := fmt.Sprintf("https://127.0.0.1:%d/user", api.port)

	// The trust files: the image's bundle, then the interception CA
	// (not the API's CA), which parses.
	proxyCA := call("k__read_any", map[string]any{"path": kube.TrustDir + "/" + kube.TrustCAName})
	blk, _ := pem.Decode([]byte(proxyCA))
	if blk == nil || strings.Contains(proxyCA, strings.TrimSpace(caPEM)) {
		t.Fatalf("%s/%s is no interception CA:\n%s", kube.TrustDir, kube.TrustCAName, proxyCA)
	}
	if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
		t.Fatal(err)
	}
	want := string(image)
	if !strings.HasSuffix(want, "\n") {
		want += "\n"
	}
	want += proxyCA
	bundle := call("k__read_any", map[string]any{"path": kube.TrustDir + "/" + kube.TrustBundleName})
	if bundle != want {
		t.Fatalf("%s/%s is not the image's bundle (%d bytes) and the CA: %d bytes", kube.TrustDir, kube.TrustBundleName, len(image), len(bundle))
	}

	// A client that trusts only a system bundle path.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		got, err := gwCall(ctx, alice, "k__http_get", map[string]any{"url": apiURL,
			"headers": map[string]string{"Authorization": "Bearer ${T}"}, "ca_file": kube.SystemBundles[0]})
		if err == nil && strings.HasPrefix(got, "200 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trusting only %s: %q, %v", kube.SystemBundles[0], got, err)
		}
	}
	before := api.count()
	for _, p := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem", "/etc/pki/tls/certs/ca-bundle.crt"} {
		if got := call("k__read_any", map[string]any{"path": p}); got != bundle {
			t.Fatalf("%s in the pod is not the trust bundle (%d bytes, want %d)", p, len(got), len(bundle))
		}
		got := call("k__http_get", map[string]any{"url": apiURL, "headers": map[string]string{"Authorization": "Bearer ${T}"}, "ca_file": p})
		if !strings.HasPrefix(got, "200 hello; you sent Bearer ") || strings.Contains(got, realT) {
			t.Fatalf("trusting only %s: %q", p, got)
		}
	}
	if n := api.count() - before; n != 3 || !strings.Contains(api.seen(), "Authorization=Bearer "+realT) {
		t.Fatalf("the API got %d requests, want 3 with the real token", n)
	}

	// The pods: the trust container in k's, given the CA alone; none in
	// the control's.
	var pods corev1.PodList
	if err := k.client.List(ctx, kube.Pods, k.ns, kube.LabelRole+"="+kube.RoleServer, &pods); err != nil || len(pods.Items) != 2 {
		t.Fatalf("server pods: %d, %v", len(pods.Items), err)
	}
	for _, p := range pods.Items {
		switch p.Annotations[kube.AnnotationServer] {
		case "k":
			kubeTrustContainer(t, p, proxyCA)
		case "c":
			for _, ic := range p.Spec.InitContainers {
				if ic.Name == kube.TrustContainer {
					t.Fatal("the control pod has the trust container")
				}
			}
		default:
			t.Fatalf("pod %s of server %q", p.Name, p.Annotations[kube.AnnotationServer])
		}
	}

	// The control: no inject, the image's own bundle, and the same client
	// fails TLS.
	if got := call("c__read_any", map[string]any{"path": kube.SystemBundles[0]}); got != string(image) {
		t.Fatalf("%s in the control pod is not the image's (%d bytes, want %d)", kube.SystemBundles[0], len(got), len(image))
	}
	if got, err := gwCall(ctx, alice, "c__read_any", map[string]any{"path": kube.TrustDir + "/" + kube.TrustBundleName}); err == nil {
		t.Fatalf("the control pod has a trust bundle: %q", got)
	}
	before = api.count()
	got, err := gwCall(ctx, alice, "c__http_get", map[string]any{"url": apiURL, "ca_file": kube.SystemBundles[0]})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("the control trusting only %s: %q, %v; want a certificate error", kube.SystemBundles[0], got, err)
	}
	if api.count() != before {
		t.Fatal("the API got a request the control's client could not have verified")
	}
}

// kubeTrustContainer checks pod's trust init container: it ran the
// copied agent on the server's image with the CA certificate alone (no key) in its environment,
// hardened as the server's container, and exited 0.
func kubeTrustContainer(t *testing.T, pod corev1.Pod, proxyCA string) {
	t.Helper()
	var tc *corev1.Container
	for i, ic := range pod.Spec.InitContainers {
		if ic.Name == kube.TrustContainer {
			tc = &pod.Spec.InitContainers[i]
		}
	}
	if tc == nil {
		t.Fatalf("pod %s has no trust container", pod.Name)
	}
	if tc.Image != pod.Spec.Containers[0].Image || tc.Command[0] != kube.AgentBin {
		t.Fatalf("the trust container runs %s on %s; want the copied agent on the server's image %s", tc.Command[0], tc.Image, pod.Spec.Containers[0].Image)
	}
	if len(tc.Env) != 1 || tc.Env[0].Value != proxyCA || strings.Contains(tc.Env[0].Value, "PRIVATE KEY") {
		t.Fatalf("the trust container's env: %+v", tc.Env)
	}
	if sc := tc.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation {
		t.Fatalf("the trust container's security context: %+v", sc)
	}
	for _, st := range pod.Status.InitContainerStatuses {
		if st.Name == kube.TrustContainer && (st.State.Terminated == nil || st.State.Terminated.ExitCode != 0) {
			t.Fatalf("the trust container's state: %+v", st.State)
		}
	}
}
