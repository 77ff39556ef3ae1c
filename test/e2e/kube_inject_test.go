package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/kube"
	"mcpbox/internal/kube/egressproxy"
)

// TestKubeInject: a server in a pod with secrets.T.inject holds only a
// placeholder (its variable, /proc/self/environ) and the interception
// CA's trust (SSL_CERT_FILE under kube.TrustDir); it calls the loopback
// HTTPS API that requires the real token through the shared egress proxy
// and succeeds, the echo of the token redacted; a second secret (as a
// file) holds a placeholder too; the placeholder sent to another allowed
// host (plain HTTP) or to the other secret's host (intercepted TLS) is
// refused before it leaves and audited as an exfiltration attempt, the
// injection as secret_inject; the real values and the interception CA's
// key are in no Secret,
// ConfigMap, Pod or Deployment; and a proxy replica the gateway has not
// registered the pod with (the same binary and config, started by the
// test) refuses the credential's host to the pod's own token while it
// lets the pod reach its other allowed host.
func TestKubeInject(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	caPEM, cert := injCA(t)
	realT, realU := injToken(t), injToken(t)
	api := injAPI(t, cert, realT)
	other := injServe(t, cert, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") })
	plain := injServe(t, nil, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain") })

	k := kubeCluster(t)
	agent, server := kubeBins(t)
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(k.dir, "state"), "audit": map[string]string{"jsonl": filepath.Join(k.dir, "audit.jsonl")},
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": k.ns, "kubeconfig": k.cluster.Kubeconfig,
			"agent_path": agent, "image": "mcpbox.test/base:1"},
		"servers": map[string]any{"k": map[string]any{
			"command": []string{server, "-name", "k"},
			"tools":   map[string]any{"allow": []string{"*"}},
			"network": map[string]any{"egress": []map[string]any{{"host": "127.0.0.1", "ports": []int{api.port, other.port, plain.port}}}},
			"secrets": map[string]any{"T": map[string]any{"from": "env:INJ_T",
				"inject": map[string]any{"hosts": []string{fmt.Sprintf("127.0.0.1:%d", api.port)}, "header": "Authorization", "format": "Bearer {value}"}},
				"U": map[string]any{"from": "env:INJ_U", "as": "file",
					"inject": map[string]any{"hosts": []string{fmt.Sprintf("127.0.0.1:%d", other.port)}, "header": "X-Api-Key"}}},
		}},
	}
	k.writeConfig(t, c)
	caFile := filepath.Join(k.dir, "upstream-ca.pem")
	if err := os.WriteFile(caFile, []byte(caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	k.keepLogs(t)
	g := gwServe(t, mode{uid: -1}, k.config, "TOK_ALICE=alice-token-0123456789abcdef", "INJ_T="+realT, "INJ_U="+realU, "SSL_CERT_FILE="+caFile)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	call := kubeCaller(t, ctx, alice)

	// What the pod holds: the placeholder and the trust, never the value.
	ph := call("getenv", map[string]any{"text": "T"})
	if ph == realT || len(ph) != len(realT) || !strings.HasPrefix(ph, "ghp_") {
		t.Fatalf("T in the pod = %q: want a placeholder of the real token's shape", ph)
	}
	environ := call("read_any", map[string]any{"path": "/proc/self/environ"})
	if strings.Contains(environ, realT) || !strings.Contains(environ, "T="+ph+"\n") ||
		!strings.Contains(environ, "SSL_CERT_FILE="+kube.TrustDir+"/"+kube.TrustBundleName+"\n") {
		t.Fatalf("the pod's environment lacks the placeholder or the trust bundle, or holds the value:\n%s", environ)
	}
	proxyCA := call("read_any", map[string]any{"path": kube.TrustDir + "/" + kube.TrustCAName})
	if phU := call("read_any", map[string]any{"path": kube.SecretsDir + "/U"}); phU == realU || len(phU) != len(realU) {
		t.Fatalf("%s/U = %q: want a placeholder", kube.SecretsDir, phU)
	}

	// The API gets the real token; the pod never sees it, even echoed.
	apiURL := fmt.Sprintf("https://127.0.0.1:%d/user", api.port)
	var got string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		got = call("http_get", map[string]any{"url": apiURL, "headers": map[string]string{"Authorization": "Bearer ${T}"}})
		if strings.HasPrefix(got, "200 ") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(got, "200 hello; you sent Bearer ") || strings.Contains(got, realT) {
		t.Fatalf("the API call through the proxy returned %q", got)
	}
	if n := api.count(); n != 1 || !strings.Contains(api.seen(), "Authorization=Bearer "+realT) {
		t.Fatalf("the API got %d requests, want 1 with the real token:\n%s", n, api.seen())
	}
	// The placeholder to the other allowed host is refused before it
	// leaves.
	got = call("http_get", map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/x", plain.port),
		"headers": map[string]string{"X-Leak": "${T}"}})
	if !strings.HasPrefix(got, "403 ") || plain.count() != 0 {
		t.Fatalf("the placeholder to another allowed host: %q (the host saw %d requests), want 403 and none", got, plain.count())
	}
	// ... and to another secret's host (intercepted TLS): no laundering.
	got = call("http_get", map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d/x", other.port),
		"headers": map[string]string{"X-Api-Key": "${T}"}})
	if !strings.HasPrefix(got, "403 ") || other.count() != 0 {
		t.Fatalf("T's placeholder to U's host: %q (the host saw %d requests), want 403 and none", got, other.count())
	}

	// A replica without the pod's registration: the proxy's config
	// (from its Secret: the token key too, with which the test signs a
	// token of the pod as the gateway does; the pod's own is redacted
	// from its results), through a proxy the gateway does not know of.
	var pods corev1.PodList
	if err := k.client.List(ctx, kube.Pods, k.ns, kube.LabelRole+"="+kube.RoleServer, &pods); err != nil || len(pods.Items) != 1 {
		t.Fatalf("server pods: %d, %v", len(pods.Items), err)
	}
	pod, gw := pods.Items[0].Name, pods.Items[0].Labels[kube.LabelGateway]
	var cfgSecret corev1.Secret
	if err := k.client.Get(ctx, kube.Secrets, k.ns, kube.ProxyName(gw), &cfgSecret); err != nil {
		t.Fatal(err)
	}
	pcfg, err := egressproxy.ParseConfig(cfgSecret.Data[kube.ProxyConfigKey])
	if err != nil {
		t.Fatal(err)
	}
	if inj := pcfg.Servers["k"].Inject; len(inj) != 2 || !slices.Contains(inj, fmt.Sprintf("127.0.0.1:%d", api.port)) {
		t.Fatalf("the proxy's config names the credential's hosts %q", inj)
	}
	token := egressproxy.Sign(pcfg.Key, pod, "k", time.Now().Add(time.Hour))
	kubeInjectUnregistered(t, cfgSecret.Data[kube.ProxyConfigKey], pod, token, []byte(proxyCA+caPEM), api, plain, ph)

	// Nothing in the API holds the value or the interception CA's key.
	kubeInjectNoValueInObjects(t, ctx, k, realT, proxyCA)
	kubeInjectNoValueInObjects(t, ctx, k, realU, proxyCA)

	// The serving proxy replica restarts and loses the registrations
	// (memory only): until the gateway sends them again its answer to
	// the credential's host is a refusal, never a tunnel; then the call
	// succeeds again.
	kubeInjectRestart(t, ctx, k, gw, func() string {
		got, err := gwCall(ctx, alice, "http_get", map[string]any{"url": apiURL, "headers": map[string]string{"Authorization": "Bearer ${T}"}})
		if err != nil {
			return err.Error() // the tool's error result: the proxy not listening yet
		}
		return got
	})
	if strings.Contains(api.seen(), ph) {
		t.Fatalf("the API saw the placeholder:\n%s", api.seen())
	}

	// The audit: the injection joined to its call, the exfiltration.
	var inject, exfil []auRecord
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		r := mode{uid: -1}.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", k.config, "--server", "k")
		inject, exfil = nil, nil
		for _, rec := range auDecode(t, r.stdout) {
			switch rec.str("event") {
			case "secret_inject":
				inject = append(inject, rec)
			case "secret_exfiltration":
				exfil = append(exfil, rec)
			}
		}
		if len(inject) >= 2 && len(exfil) >= 2 {
			break
		}
	}
	if len(inject) < 2 || len(exfil) != 2 {
		t.Fatalf("want a secret_inject record per call that reached the API (2 or more) and two secret_exfiltration records, got %v and %v", inject, exfil)
	}
	d, _ := inject[0]["detail"].(map[string]any)
	if d["secret"] != "T" || d["port"] != fmt.Sprint(api.port) || d["where"] != "header Authorization" ||
		!strings.HasPrefix(inject[0].str("sandbox"), "sbx_") || inject[0].str("server") != "k" || inject[0].str("client") != "alice" {
		t.Fatalf("secret_inject record: %v", inject[0])
	}
	ports := map[string]bool{}
	for _, rec := range exfil {
		d, _ := rec["detail"].(map[string]any)
		if d["secret"] != "T" || rec.str("decision") != "deny" || !strings.HasPrefix(rec.str("sandbox"), "sbx_") {
			t.Fatalf("secret_exfiltration record: %v", rec)
		}
		ports[fmt.Sprint(d["port"])] = true
	}
	if !ports[fmt.Sprint(plain.port)] || !ports[fmt.Sprint(other.port)] {
		t.Fatalf("want exfiltration records for ports %d and %d, got %v", plain.port, other.port, exfil)
	}
	all := mode{uid: -1}.mcpbox(t, 60*time.Second, "", "logs", "--json", "--config", k.config).stdout
	if strings.Contains(all, realT) || strings.Contains(all, realU) {
		t.Fatal("the real value is in the audit")
	}
	gwClose(t, alice)
	g.stop(t)
}

// kubeInjectUnregistered runs `mcpbox egress-proxy` with cfg on a port
// of its own, registers nothing with it, and checks that pod's token
// there reaches the plain host but is refused the API (the credential's
// host) with the reason in the decision log, the API seeing nothing.
func kubeInjectUnregistered(t *testing.T, cfg []byte, pod, token string, roots []byte, api, plain *injService, ph string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mcpboxBin, "egress-proxy", "--listen", "127.0.0.1:0", "--config", file)
	stderr, _ := cmd.StderrPipe()
	stdout := &lockedBuf{}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`on (127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the unregistered proxy did not say where it serves")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(roots) {
		t.Fatal("no roots")
	}
	pu := &url.URL{Scheme: "http", User: url.UserPassword(pod, token), Host: a}
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	before := api.count()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/user", api.port), nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the unregistered replica let the pod reach the credential's host: %s", resp.Status)
	} else if !strings.Contains(err.Error(), "Forbidden") {
		time.Sleep(200 * time.Millisecond)
		t.Fatalf("the unregistered replica: %v, want a refused CONNECT; its log:\n%s", err, stdout.String())
	}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/ok", plain.port))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the pod's token at the unregistered replica, to its other host: %v %v", resp, err)
	}
	resp.Body.Close()
	if api.count() != before {
		t.Fatalf("the API saw a request through the unregistered replica:\n%s", api.seen())
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s := stdout.String()
		if strings.Contains(s, "no credential registration for pod "+pod) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unregistered replica's log lacks the reason:\n%s", s)
		}
	}
}

// kubeInjectNoValueInObjects: no Secret, ConfigMap, Pod or Deployment of
// the namespace holds the real value, and no private key in them is the
// interception CA's (whose certificate the pod trusts).
func kubeInjectNoValueInObjects(t *testing.T, ctx context.Context, k *kubeEnv, real, caPEM string) {
	t.Helper()
	blk, _ := pem.Decode([]byte(caPEM))
	if blk == nil {
		t.Fatalf("the pod's proxy CA file holds no certificate: %q", caPEM)
	}
	caCert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var secrets corev1.SecretList
	var cms corev1.ConfigMapList
	var pods corev1.PodList
	for res, out := range map[kube.Resource]any{kube.Secrets: &secrets, kube.ConfigMaps: &cms, kube.Pods: &pods} {
		if err := k.client.List(ctx, res, k.ns, "", out); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal([]any{secrets, cms, pods})
	if strings.Contains(string(raw), real) {
		t.Fatal("an API object holds the real value")
	}
	keys := 0
	for _, s := range secrets.Items {
		for name, v := range s.Data {
			if strings.Contains(string(v), real) {
				t.Fatalf("secret %s key %s holds the real value", s.Name, name)
			}
			for rest := v; ; {
				var b *pem.Block
				if b, rest = pem.Decode(rest); b == nil {
					break
				}
				key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
				if err != nil {
					continue
				}
				keys++
				if pk, ok := key.(interface{ Public() any }); ok {
					if eq, ok := pk.Public().(interface{ Equal(any) bool }); ok && eq.Equal(caCert.PublicKey) {
						t.Fatalf("secret %s key %s holds the interception CA's key", s.Name, name)
					}
				}
			}
		}
		if strings.Contains(string(s.Data[kube.ProxyConfigKey]), "PRIVATE KEY") {
			t.Fatalf("the proxy's config Secret %s holds a private key", s.Name)
		}
	}
	if keys < 2 {
		t.Fatalf("%d private keys in the Secrets, want the pod's and the proxy's TLS keys at least: the check saw nothing", keys)
	}
	t.Logf("%d secrets, %d config maps, %d pods checked; %d private keys, none the interception CA's", len(secrets.Items), len(cms.Items), len(pods.Items), keys)
}

// lockedBuf is a buffer a process writes while the test reads it.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// kubeInjectRestart kills the serving proxy replica's process (by its
// PID on the test node) and calls get until it answers 200 again: every
// answer before must be the proxy's refusal or a failure to connect.
func kubeInjectRestart(t *testing.T, ctx context.Context, k *kubeEnv, gw string, get func() string) {
	t.Helper()
	var pods corev1.PodList
	if err := k.client.List(ctx, kube.Pods, k.ns, kube.Selector(gw, kube.RoleEgress), &pods); err != nil {
		t.Fatal(err)
	}
	var pod string
	pid := 0
	for _, p := range pods.Items {
		if out, _ := k.cluster.Node.Logs(k.ns, p.Name, "proxy"); strings.Contains(out, "registration endpoint") {
			if n := k.cluster.Node.ContainerPID(k.ns, p.Name, "proxy"); n > 0 {
				pod, pid = p.Name, n
			}
		}
	}
	if pid == 0 {
		t.Fatal("no serving proxy replica")
	}
	if !k.cluster.Node.KillContainer(k.ns, pod, "proxy") {
		t.Fatalf("proxy pod %s's process ended before it was killed", pod)
	}
	t.Logf("killed proxy pod %s's process %d", pod, pid)
	refused := 0
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got := get()
		if strings.HasPrefix(got, "200 ") {
			break
		}
		if strings.Contains(got, "no credential registration") {
			refused++
		} else if !strings.Contains(got, "fetching:") && !strings.HasPrefix(got, "407 ") {
			t.Fatalf("after the proxy's restart: %q, want a refusal or a failure to connect", got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call did not succeed again within 60s of the proxy's restart: %q", got)
		}
	}
	t.Logf("the call succeeded again after the proxy's restart (%d refusals for want of a registration before)", refused)
}
