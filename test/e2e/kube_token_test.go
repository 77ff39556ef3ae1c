package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/kube"
	"mcpbox/internal/kube/egressproxy"
)

// shortTokenTTL is the pods' egress proxy token life of the mcpbox
// TestKubeEgressTokenRenewed builds (-X testProxyTokenTTL): renewed every
// 2 s.
const shortTokenTTL = 6 * time.Second

// shortTokenBin builds mcpbox with the egress proxy tokens' life cut to
// shortTokenTTL, into a dir every uid can read (the test node's pods run
// it as the agent and the proxy too), removed at cleanup.
func shortTokenBin(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "mcpbox-kube-token-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "mcpbox")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X mcpbox/internal/daemon.testProxyTokenTTL="+shortTokenTTL.String(),
		"-o", bin, "mcpbox/cmd/mcpbox")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestKubeEgressTokenRenewed: a server pod keeps its egress past its
// first proxy token's end. The gateway (built with 6 s tokens) hands the
// pod's agent a token, never the server (whose environment names the
// agent's loopback front and holds no token), and renews it every 2 s
// over the agent's mutual-TLS channel; the server's requests through the
// real egress proxy (its Deployment on the test node, against the real
// kube-apiserver and etcd) still succeed three token lives after the
// first call. A token of that pod signed with the proxy's own key (read
// from its config Secret) but already expired is refused (407), and one
// not yet expired is taken, so the refusal is the expiry's.
func TestKubeEgressTokenRenewed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "allowed-body")
	}))
	defer allowed.Close()
	portA := allowed.Listener.Addr().(*net.TCPAddr).Port

	bin := shortTokenBin(t)
	k := kubeCluster(t)
	cluster, client, ns, dir := k.cluster, k.client, k.ns, k.dir
	_, server := kubeBins(t)
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(dir, "state"),
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": ns, "kubeconfig": cluster.Kubeconfig,
			"agent_path": bin, "image": "mcpbox.test/base:1"},
		"servers": map[string]any{"k": map[string]any{
			"command": []string{server, "-name", "k"},
			"tools":   map[string]any{"allow": []string{"*"}},
			"network": map[string]any{"egress": []map[string]any{{"host": "127.0.0.1", "ports": []int{portA}}}},
		}},
	}
	e := &kubeEnv{cluster: cluster, client: client, ns: ns, dir: dir}
	e.writeConfig(t, c)
	e.keepLogs(t)
	g := gwServe(t, mode{uid: -1, bin: bin}, e.config, "TOK_ALICE=alice-token-0123456789abcdef")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice, err := gwConnectErr(ctx, g.url, &http.Client{Transport: gwBearer{token: "alice-token-0123456789abcdef", base: gwHTTP.Transport}}, nil, gwLegacy)
	if err != nil {
		t.Fatal(err)
	}
	defer gwClose(t, alice)

	urlA := fmt.Sprintf("http://127.0.0.1:%d/a", portA)
	get := func() (string, error) { return gwCall(ctx, alice, "http_get", map[string]any{"url": urlA}) }
	// The first pod with egress waits for a proxy pod; a few tries more
	// cover the moment between its Ready and its listen.
	var got string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got, err = get()
		if err == nil && strings.HasPrefix(got, "200 ") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || got != "200 allowed-body" {
		t.Fatalf("http_get of the allowed URL = %q, %v", got, err)
	}
	// The pod's first token was issued before this first call.
	firstEnd := time.Now().Add(shortTokenTTL)
	environ, err := gwCall(ctx, alice, "read_any", map[string]any{"path": "/proc/self/environ"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(environ, "v1.") || !strings.Contains(environ, "HTTP_PROXY=http://mcpbox:") || strings.Contains(environ, ":3128") {
		t.Errorf("the server's environment: want the agent's front in its proxy variables and no token:\n%s", environ)
	}
	// Past the first token's end, and two more lives: egress goes on.
	for _, at := range []time.Duration{time.Second, shortTokenTTL + time.Second, 2*shortTokenTTL + time.Second} {
		time.Sleep(time.Until(firstEnd.Add(at)))
		if got, err := get(); err != nil || got != "200 allowed-body" {
			t.Fatalf("http_get %s after the first token's end = %q, %v", at, got, err)
		}
	}

	// The pod, its agent's renewals, and the proxy's key.
	var pods corev1.PodList
	if err := client.List(ctx, kube.Pods, ns, kube.LabelRole+"="+kube.RoleServer, &pods); err != nil || len(pods.Items) != 1 {
		t.Fatalf("server pods: %d, %v", len(pods.Items), err)
	}
	pod := pods.Items[0]
	log, _ := cluster.Node.Logs(ns, pod.Name, kube.ServerContainer)
	if n := strings.Count(log, "renewed the egress proxy token\n"); n < 4 {
		t.Errorf("the agent renewed its token %d times in %s, want every 2 s:\n%s", n, 3*shortTokenTTL, log)
	}
	if strings.Contains(log, "v1.") {
		t.Errorf("the pod's log holds a token:\n%s", log)
	}
	var sec corev1.Secret
	if err := client.Get(ctx, kube.Secrets, ns, kube.ProxyName(pod.Labels[kube.LabelGateway]), &sec); err != nil {
		t.Fatal(err)
	}
	cfg, err := egressproxy.ParseConfig(sec.Data[kube.ProxyConfigKey])
	if err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprintf("127.0.0.1:%d", portA)
	for _, tc := range []struct {
		expiry time.Time
		want   int
	}{{time.Now().Add(-time.Second), http.StatusProxyAuthRequired}, {time.Now().Add(time.Minute), http.StatusOK}} {
		tok := egressproxy.Sign(cfg.Key, pod.Name, "k", tc.expiry)
		code, body := proxyCONNECT(t, "127.0.0.1:3128", pod.Name, tok, target)
		if code != tc.want || tc.want != http.StatusOK && !strings.Contains(body, "token expired") {
			t.Errorf("a token of pod %s ending %s: %d %q, want %d", pod.Name, tc.expiry.Format(time.TimeOnly), code, body, tc.want)
		}
	}
}

// proxyCONNECT CONNECTs to target through the proxy at addr as user with
// token: the status, and the body of a refusal.
func proxyCONNECT(t *testing.T, addr, user, token, target string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target,
		base64.StdEncoding.EncodeToString([]byte(user+":"+token)))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode, string(b)
}
