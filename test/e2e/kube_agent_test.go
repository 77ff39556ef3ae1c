package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"mcpbox/internal/kube"
)

// TestKubeAgentImage: an image server whose image lacks mcpbox (on the
// test node the image upstream is the host's root without the agent at
// agent_path) fails to start with an error that names agent_path, the
// image and backend.agent_image; with backend.agent_image (an image that
// has the agent) the pod's hardened init container copies the agent in,
// the server's container runs that copy from a read-only mount, and the
// server answers tools/call; an agent image without the agent fails the
// start with one line naming agent_path and that image.
func TestKubeAgentImage(t *testing.T) {
	e := kubeCluster(t)
	agent, server := kubeBins(t)
	upstream := "mcpbox.test/upstream-" + e.ns + ":1"
	e.cluster.Node.ImageWithout(upstream, agent)
	t.Cleanup(func() { e.cluster.Node.ImageWithout(upstream) })
	const agentImage = "mcpbox.test/agent:1"
	write := func(name, agentImage string) {
		b := map[string]any{"kind": "kubernetes", "namespace": e.ns, "kubeconfig": e.cluster.Kubeconfig, "agent_path": agent}
		if agentImage != "" {
			b["agent_image"] = agentImage
		}
		c := map[string]any{
			"version": 1, "state_dir": filepath.Join(e.dir, "state"),
			"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
			"backend": b,
			"servers": map[string]any{"k": map[string]any{"image": upstream, "args": []string{server, "-name", "k"},
				"tools": map[string]any{"allow": []string{"*"}}}},
		}
		raw, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		e.config = filepath.Join(e.dir, name+".yaml")
		if err := os.WriteFile(e.config, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	write("bare", "")
	doctor := func(want string) {
		t.Helper()
		r := mode{uid: -1}.mcpbox(t, 60*time.Second, "", "doctor", "--backend", "kubernetes", "--config", e.config)
		if !strings.Contains(r.stdout, want) {
			t.Errorf("mcpbox doctor --backend kubernetes does not say %q:\n%s", want, r)
		}
	}
	doctor("every server image, backend.image and the npm base image must contain mcpbox at " + agent)
	g := e.serve(t)
	// The only server cannot start: initialize fails, and says why.
	hc := &http.Client{Transport: gwBearer{token: "alice-token-0123456789abcdef", base: gwHTTP.Transport}}
	if sess, err := gwConnectErr(ctx, g.url, hc, nil, gwLegacy); err == nil {
		sess.Close()
		t.Fatal("a session started with the only server on an image without the agent")
	}
	want := fmt.Sprintf("is mcpbox at backend.agent_path (%s) in the image %s? Set backend.agent_image", agent, upstream)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(g.logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's log does not say %q:\n%s", want, g.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.stop(t)
	e.waitPods(t, 0, 60*time.Second)

	write("copied", agentImage)
	doctor("copied into every pod from backend.agent_image " + agentImage)
	g = e.serve(t)
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	gwMustCall(t, alice, "echo", map[string]any{"text": "hi from an upstream image"}, "hi from an upstream image")
	pods := e.waitPods(t, 1, 30*time.Second)
	p := pods[0]
	kubeCheckPod(t, &p)
	if len(p.Spec.InitContainers) != 1 {
		t.Fatalf("init containers %d, want the agent's", len(p.Spec.InitContainers))
	}
	ic, srv := p.Spec.InitContainers[0], p.Spec.Containers[0]
	if ic.Name != kube.AgentContainer || ic.Image != agentImage || ic.Command[0] != agent ||
		srv.Image != upstream || srv.Command[0] != kube.AgentBin {
		t.Errorf("agent container %s %s %q, server container %s %q", ic.Name, ic.Image, ic.Command, srv.Image, srv.Command)
	}
	if sc := ic.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!*sc.RunAsNonRoot || sc.Capabilities.Drop[0] != "ALL" || ic.Resources.Limits.Memory().Value() == 0 {
		t.Errorf("agent container's security context %+v, limits %v", sc, ic.Resources.Limits)
	}
	// The server container's pid 1 is the copy, on a read-only mount.
	pid := e.cluster.Node.ContainerPID(e.ns, p.Name, kube.ServerContainer)
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || !strings.HasSuffix(exe, "/root"+kube.AgentBin) { // the host sees the container's root
		t.Errorf("the server container's pid 1 (%d) runs %q (%v), want %s", pid, exe, err, kube.AgentBin)
	}
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	var opts string
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 5 && f[4] == kube.AgentDir {
			opts = f[5]
		}
	}
	if o := "," + opts + ","; !strings.Contains(o, ",ro,") || strings.Contains(o, ",noexec,") {
		t.Errorf("the server container's %s is mounted %q, want read-only and not noexec", kube.AgentDir, opts)
	}
	gwClose(t, alice)
	g.stop(t)
	e.waitPods(t, 0, 60*time.Second)

	// An agent image without mcpbox at agent_path: the init container's
	// copy fails, and the one line says where the agent was looked for,
	// naming the server once.
	noAgent := "mcpbox.test/noagent-" + e.ns + ":1"
	e.cluster.Node.ImageWithout(noAgent, agent)
	t.Cleanup(func() { e.cluster.Node.ImageWithout(noAgent) })
	write("noagent", noAgent)
	g = e.serve(t)
	if sess, err := gwConnectErr(ctx, g.url, hc, nil, gwLegacy); err == nil {
		sess.Close()
		t.Fatal("a session started with the only server's agent image lacking the agent")
	}
	want = fmt.Sprintf("init container agent exited with status 127; copying the agent: is mcpbox at backend.agent_path (%s) in backend.agent_image %s?", agent, noAgent)
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(g.logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's log does not say %q:\n%s", want, g.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(g.logs.String(), "starting server k: starting server k") {
		t.Errorf("the start's error repeats its prefix:\n%s", g.logs)
	}
	g.stop(t)
	e.waitPods(t, 0, 60*time.Second)
}

// TestKubePackageAgentImage: an npm package server on a base image
// without the agent (the stock node image's case) runs with
// backend.agent_image: the pod's first init container copies the agent,
// the install container runs the copy (npm ci through the egress proxy,
// whose Deployment runs on the agent image, since the base image has no
// mcpbox), and the server answers tools/call.
func TestKubePackageAgentImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kubernetes test node needs root")
	}
	awaitProxyPort(t)
	modules := requireNode(t)
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol/server-memory", "package.json")); err != nil {
		t.Skipf("server-memory not installed: %v", err)
	}
	reg := newNPMRegistry(t, modules)
	e := kubeCluster(t)
	agent, _ := kubeBins(t)
	base := "mcpbox.test/node-" + e.ns + ":22"
	e.cluster.Node.ImageWithout(base, agent)
	t.Cleanup(func() { e.cluster.Node.ImageWithout(base) })
	const agentImage = "mcpbox.test/agent:1"
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(e.dir, "state"),
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": e.ns, "kubeconfig": e.cluster.Kubeconfig,
			"agent_path": agent, "agent_image": agentImage, "base_images": map[string]string{"npm": base}},
		"servers": map[string]any{"memory": map[string]any{
			"package": "npm:@modelcontextprotocol/server-memory",
			"env":     map[string]string{"MEMORY_FILE_PATH": "/tmp/memory.jsonl"},
			"tools":   map[string]any{"allow": []string{"*"}},
		}},
	}
	e.writeConfig(t, c)
	g := gwServe(t, mode{uid: -1}, e.config, "TOK_ALICE=alice-token-0123456789abcdef", "NPM_CONFIG_REGISTRY="+reg.url(), "HOME="+e.dir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	if got := gwMustCall(t, alice, "read_graph", map[string]any{}, ""); !strings.Contains(got, "entities") {
		t.Errorf("read_graph: %s", got)
	}
	pods := e.pods(t)
	if len(pods) != 1 {
		t.Fatalf("%d server pods", len(pods))
	}
	p := pods[0]
	var names []string
	for _, ic := range p.Spec.InitContainers {
		names = append(names, ic.Name+"="+ic.Image+":"+ic.Command[0])
	}
	want := []string{kube.AgentContainer + "=" + agentImage + ":" + agent, kube.InstallContainer + "=" + base + ":" + kube.AgentBin}
	if strings.Join(names, " ") != strings.Join(want, " ") || p.Spec.Containers[0].Command[0] != kube.AgentBin {
		t.Errorf("init containers %q, want %q; server command %q", names, want, p.Spec.Containers[0].Command)
	}
	var deps appsv1.DeploymentList
	if err := e.client.List(ctx, kube.Deployments, e.ns, kube.LabelRole+"="+kube.RoleEgress, &deps); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 1 || deps.Items[0].Spec.Template.Spec.Containers[0].Image != agentImage {
		t.Errorf("egress proxy deployments %d, want one on %s", len(deps.Items), agentImage)
	}
	gwClose(t, alice)
	g.stop(t)
	e.waitPods(t, 0, 60*time.Second)
}
