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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mcpbox/internal/kube"
)

// TestKubeInjectSecretRef: a secret added at the proxy (inject) whose
// value is a key of an existing Kubernetes Secret (kubernetes:SECRET/KEY).
// The gateway, bound to exactly the Role `mcpbox kube rbac --config`
// prints (get on that Secret by name), reads it through the API at the
// pod's start and registers it with the egress proxy: the pod holds a
// placeholder, the API behind the proxy gets the real value, the pod's
// result has it redacted; a changed Secret reaches the next pod (secrets
// rotate); the value is in no Pod, ConfigMap or Secret of the gateway's.
func TestKubeInjectSecretRef(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	caPEM, cert := injCA(t)
	realT, rotated := injToken(t), injToken(t)
	var mu sync.Mutex
	want := realT
	api := injServe(t, cert, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := r.Header.Get("Authorization") == "Bearer "+want
		mu.Unlock()
		if !ok {
			http.Error(w, "want the real token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "hello; you sent %s", r.Header.Get("Authorization"))
	})

	k := kubeCluster(t)
	agent, server := kubeBins(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sec := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Data: map[string][]byte{"token": []byte(realT)}}
	if err := k.client.Create(ctx, kube.Secrets, k.ns, sec, nil); err != nil {
		t.Fatal(err)
	}
	user := "gw-" + k.ns
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(k.dir, "state"), "audit": map[string]string{"jsonl": filepath.Join(k.dir, "audit.jsonl")},
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": k.ns, "kubeconfig": k.cluster.UserKubeconfig(t, user),
			"agent_path": agent, "image": "mcpbox.test/base:1"},
		"servers": map[string]any{"k": map[string]any{
			"command": []string{server, "-name", "k"},
			"tools":   map[string]any{"allow": []string{"*"}},
			"network": map[string]any{"egress": []map[string]any{{"host": "127.0.0.1", "ports": []int{api.port}}}},
			"secrets": map[string]any{"T": map[string]any{"from": "kubernetes:api/token",
				"inject": map[string]any{"hosts": []string{fmt.Sprintf("127.0.0.1:%d", api.port)}, "header": "Authorization", "format": "Bearer {value}"}}},
		}},
	}
	k.writeConfig(t, c)
	k.applyRBAC(t, ctx, "kube", "rbac", "--config", k.config, "--subject", user)
	caFile := filepath.Join(k.dir, "upstream-ca.pem")
	if err := os.WriteFile(caFile, []byte(caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	k.keepLogs(t)
	g := gwServe(t, mode{uid: -1}, k.config, "TOK_ALICE=alice-token-0123456789abcdef", "SSL_CERT_FILE="+caFile)
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	call := kubeCaller(t, ctx, alice)

	apiURL := fmt.Sprintf("https://127.0.0.1:%d/user", api.port)
	reach := func(real string) {
		t.Helper()
		ph := call("getenv", map[string]any{"text": "T"})
		if ph == real || len(ph) != len(real) || !strings.HasPrefix(ph, "ghp_") {
			t.Fatalf("T in the pod = %q: want a placeholder of the real token's shape", ph)
		}
		var got string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			got = call("http_get", map[string]any{"url": apiURL, "headers": map[string]string{"Authorization": "Bearer ${T}"}})
			if strings.HasPrefix(got, "200 ") || time.Now().After(deadline) {
				break
			}
		}
		if !strings.HasPrefix(got, "200 hello; you sent Bearer ") || strings.Contains(got, real) {
			t.Fatalf("the API call through the proxy returned %q", got)
		}
		if !strings.Contains(api.seen(), "Authorization=Bearer "+real) || strings.Contains(api.seen(), ph) {
			t.Fatalf("the API did not get the real token, or got the placeholder:\n%s", api.seen())
		}
	}
	reach(realT)

	// The Secret changes; the next pod's registration has the new value.
	if err := k.client.Patch(ctx, kube.Secrets, k.ns, "api", map[string]any{"data": map[string]any{"token": []byte(rotated)}}, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want = rotated
	mu.Unlock()
	if r := (mode{uid: -1}).mcpbox(t, 90*time.Second, "", "secrets", "rotate", "k/T", "--config", k.config); r.code != 0 {
		t.Fatalf("mcpbox secrets rotate: %s", r)
	}
	reach(rotated)

	// The value is in no object of the gateway's, nor in any pod or
	// ConfigMap; only the user's own Secret holds it.
	var secrets corev1.SecretList
	var cms corev1.ConfigMapList
	var pods corev1.PodList
	for res, out := range map[kube.Resource]any{kube.Secrets: &secrets, kube.ConfigMaps: &cms, kube.Pods: &pods} {
		if err := k.client.List(ctx, res, k.ns, "", out); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range secrets.Items {
		if s.Name == "api" {
			continue
		}
		for key, v := range s.Data {
			if strings.Contains(string(v), realT) || strings.Contains(string(v), rotated) {
				t.Errorf("secret %s key %s holds the value", s.Name, key)
			}
		}
	}
	raw, _ := json.Marshal([]any{cms, pods})
	if strings.Contains(string(raw), realT) || strings.Contains(string(raw), rotated) {
		t.Error("a pod or ConfigMap holds the value")
	}
	if strings.Contains(g.logs.String(), realT) || strings.Contains(g.logs.String(), rotated) {
		t.Error("the gateway's log holds the value")
	}
	gwClose(t, alice)
	g.stop(t)
}
