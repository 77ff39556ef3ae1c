package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/kube"
)

// TestKubePackageServer: an npm package server (`package:`, the real
// @modelcontextprotocol/server-memory from the loopback registry) with
// backend kubernetes: the gateway installs and pins it on this host,
// puts its lockfile into a ConfigMap, and the pod's init container (the
// agent, run once) installs exactly that tree with `npm ci
// --ignore-scripts` through the egress proxy (a registry-only token sent
// over the agent's channel, in no pod object); the server then runs from
// the read-only tree and answers tools/list and calls. The objects are
// checked as the API server holds them. Then the registry serves other
// bytes for the package: the pod's install fails npm's integrity check
// and the start fails with an error that says so.
//
// The test node shares the host's network (no NetworkPolicy is
// enforced): the proxy's decision log shows the install went through
// the proxy, under the install's own allowlist.
func TestKubePackageServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	modules := requireNode(t)
	memDir := filepath.Join(modules, "@modelcontextprotocol/server-memory")
	if _, err := os.Stat(filepath.Join(memDir, "package.json")); err != nil {
		t.Skipf("server-memory not installed: %v", err)
	}
	reg := newNPMRegistry(t, modules)
	k := kubeCluster(t)
	cluster, client, ns, dir := k.cluster, k.client, k.ns, k.dir
	agent, _ := kubeBins(t)
	e := &kubeEnv{cluster: cluster, client: client, ns: ns, dir: dir}
	e.writeConfig(t, kubeMemoryConfig(e, agent))
	env := []string{"TOK_ALICE=alice-token-0123456789abcdef", "NPM_CONFIG_REGISTRY=" + reg.url(), "HOME=" + dir}
	dumpPods := func() {
		var l corev1.PodList
		client.List(context.Background(), kube.Pods, ns, "", &l)
		for _, p := range l.Items {
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				out, err := cluster.Node.Logs(ns, p.Name, c.Name)
				t.Logf("pod %s container %s (%s): %v\n%s", p.Name, c.Name, p.Status.Phase, err, out)
			}
		}
	}
	g := gwServe(t, mode{uid: -1}, e.config, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	tools, err := alice.ListTools(ctx, nil)
	if err != nil {
		dumpPods()
		t.Fatalf("tools/list: %v\n%s", err, g.logs)
	}
	names := map[string]string{}
	for _, tool := range tools.Tools {
		_, short, _ := strings.Cut(tool.Name, "__")
		if short == "" {
			short = tool.Name
		}
		names[short] = tool.Name
	}
	if names["create_entities"] == "" || names["read_graph"] == "" {
		dumpPods()
		t.Fatalf("tools: %v\n%s", names, g.logs)
	}
	gwMustCall(t, alice, names["create_entities"], map[string]any{"entities": []map[string]any{
		{"name": "mcpbox", "entityType": "project", "observations": []string{"installed in its pod"}}}}, "")
	if got := gwMustCall(t, alice, names["read_graph"], map[string]any{}, ""); !strings.Contains(got, "installed in its pod") {
		t.Errorf("read_graph after create_entities: %s", got)
	}

	// The objects as the API server holds them.
	pods := e.pods(t)
	if len(pods) != 1 {
		t.Fatalf("%d server pods", len(pods))
	}
	p := pods[0]
	{
		// kubeCheckPod's hardening checks, under this server's name.
		q := p.DeepCopy()
		if q.Labels[kube.LabelServer] != "memory" {
			t.Errorf("pod %s: labels %v", p.Name, p.Labels)
		}
		q.Labels[kube.LabelServer] = "k"
		kubeCheckPod(t, q)
	}
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != kube.InstallContainer {
		t.Fatalf("init containers: %+v", p.Spec.InitContainers)
	}
	ic := p.Spec.InitContainers[0]
	if sc := ic.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("install container's security context: %+v", sc)
	}
	if ic.Image != "mcpbox.test/node:22" || p.Spec.Containers[0].Image != "mcpbox.test/node:22" {
		t.Errorf("images: install %q, server %q; want the npm base image", ic.Image, p.Spec.Containers[0].Image)
	}
	if cmd := strings.Join(ic.Command, " "); !strings.Contains(cmd, "agent --once") || !strings.Contains(cmd, "npm ci --ignore-scripts") {
		t.Errorf("install command: %s", cmd)
	}
	var cmName string
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	for _, vm := range p.Spec.Containers[0].VolumeMounts {
		if vm.MountPath == kube.PackageDir && !vm.ReadOnly {
			t.Error("the server's package tree is writable")
		}
	}
	var cm corev1.ConfigMap
	if err := client.Get(ctx, kube.ConfigMaps, ns, cmName, &cm); err != nil {
		t.Fatalf("the package's configmap %q: %v", cmName, err)
	}
	pinned, err := os.ReadFile(filepath.Join(dir, "mcpbox.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Immutable == nil || !*cm.Immutable || len(cm.OwnerReferences) != 1 || !strings.Contains(cm.Data["package-lock.json"], `"@modelcontextprotocol/server-memory"`) ||
		!strings.Contains(cm.Data["package-lock.json"], "sha512-") || !strings.Contains(string(pinned), "server-memory") {
		t.Errorf("configmap: owner %v immutable %v lock %.200s", cm.OwnerReferences, cm.Immutable, cm.Data["package-lock.json"])
	}
	// The proxy token is in no pod object: it came over the agent's channel.
	raw, _ := json.Marshal(p)
	if strings.Contains(string(raw), "HTTP_PROXY") || strings.Contains(string(raw), "_authToken") {
		t.Error("the pod's spec holds the proxy variables")
	}
	// The install went through the proxy, as the install's own server.
	var proxyLog string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		var l corev1.PodList
		client.List(ctx, kube.Pods, ns, kube.LabelRole+"="+kube.RoleEgress, &l)
		proxyLog = ""
		for _, pp := range l.Items {
			for _, c := range pp.Spec.Containers {
				out, _ := cluster.Node.Logs(ns, pp.Name, c.Name)
				proxyLog += out
			}
		}
		if strings.Contains(proxyLog, `"server":"memory#install"`) {
			break
		}
	}
	if !strings.Contains(proxyLog, `"server":"memory#install"`) || !strings.Contains(proxyLog, `"decision":"allow"`) ||
		strings.Contains(proxyLog, `"server":"memory"`) {
		t.Errorf("the proxy logged no allowed connection of the install:\n%s", proxyLog)
	}
	g.stop(t)

	// The registry now serves other bytes for the pinned package; the
	// host's store still has it (no fetch there), the pod fetches.
	reg.republish(t, "@modelcontextprotocol/server-memory", memDir, map[string]string{"dist/evil.js": "process.exit(9)\n"})
	g2 := gwServe(t, mode{uid: -1}, e.config, env...)
	// The start fails: at the session's initialize, or at the call.
	hc := &http.Client{Transport: gwBearer{token: "alice-token-0123456789abcdef", base: gwHTTP.Transport}}
	if bob, err := gwConnectErr(ctx, g2.url, hc, nil, gwLegacy); err == nil {
		defer bob.Close()
		if got, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: names["read_graph"], Arguments: map[string]any{}}); err == nil && !got.IsError {
			t.Fatalf("a call succeeded with a tampered registry")
		}
	}
	want := "installing npm:@modelcontextprotocol/server-memory in pod "
	g2.logs.waitFor(want, 90*time.Second)
	logs := g2.logs.String()
	if !strings.Contains(logs, want) || !strings.Contains(logs, "failed (exit status") || !strings.Contains(logs, "EINTEGRITY") {
		dumpPods()
		t.Fatalf("the gateway's log does not say the pod's install failed its integrity check:\n%s", logs)
	}
}

// TestKubePackagePrivateRegistry: a registry that wants a token (the
// user's .npmrc, `${NPM_TOKEN}`): the pod's install gets it as a file
// over its agent's channel and installs; the token is in no object of
// the namespace (pods, ConfigMaps, Secrets: not in etcd) and the proxy
// shows the install's fetches allowed.
func TestKubePackagePrivateRegistry(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	modules := requireNode(t)
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol/server-memory/package.json")); err != nil {
		t.Skipf("server-memory not installed: %v", err)
	}
	const token = "npm-private-token-0123456789abcdef"
	reg := newNPMRegistry(t, modules)
	reg.token = token
	k := kubeCluster(t)
	cluster, client, ns, dir := k.cluster, k.client, k.ns, k.dir
	agent, _ := kubeBins(t)
	k.writeConfig(t, kubeMemoryConfig(k, agent))
	cfgPath := k.config
	host := strings.TrimPrefix(strings.TrimSuffix(reg.url(), "/"), "http:")
	if err := os.WriteFile(filepath.Join(dir, ".npmrc"), []byte(host+"/:_authToken=${NPM_TOKEN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := gwServe(t, mode{uid: -1}, cfgPath, "TOK_ALICE=alice-token-0123456789abcdef", "NPM_CONFIG_REGISTRY="+reg.url(),
		"HOME="+dir, "NPM_TOKEN="+token)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The host installed and pinned already; what comes now is the pod's.
	before, refusedBefore := reg.requests.Load(), reg.refused.Load()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	tools, err := alice.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		for _, p := range (&kubeEnv{client: client, ns: ns}).pods(t) {
			out, _ := cluster.Node.Logs(ns, p.Name, kube.InstallContainer)
			t.Logf("pod %s install log:\n%s", p.Name, out)
		}
		t.Fatalf("tools/list: %v\n%s", err, g.logs)
	}
	if reg.requests.Load() == before || reg.refused.Load() != refusedBefore {
		t.Errorf("the pod's install made %d requests to the registry, %d of them without the token",
			reg.requests.Load()-before, reg.refused.Load()-refusedBefore)
	}
	// The token is in no object of the namespace.
	for _, res := range []kube.Resource{kube.Pods, kube.ConfigMaps, kube.Secrets} {
		var l map[string]any
		if err := client.List(ctx, res, ns, "", &l); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(l)
		if strings.Contains(string(raw), token) {
			t.Errorf("the registry token is in the namespace's %s", res.Plural)
		}
	}
	if strings.Contains(g.logs.String(), token) {
		t.Error("the registry token is in the gateway's log")
	}
}

// kubeMemoryConfig is a gateway config for e's namespace with one
// client, alice, and one server, memory: npm's server-memory as a
// package server on the test node's npm base image, agent at agent.
func kubeMemoryConfig(e *kubeEnv, agent string) map[string]any {
	return map[string]any{
		"version": 1, "state_dir": filepath.Join(e.dir, "state"),
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": e.ns, "kubeconfig": e.cluster.Kubeconfig,
			"agent_path": agent, "base_images": map[string]string{"npm": "mcpbox.test/node:22"}},
		"servers": map[string]any{"memory": map[string]any{
			"package": "npm:@modelcontextprotocol/server-memory",
			"env":     map[string]string{"MEMORY_FILE_PATH": "/tmp/memory.jsonl"},
			"tools":   map[string]any{"allow": []string{"*"}},
		}},
	}
}
