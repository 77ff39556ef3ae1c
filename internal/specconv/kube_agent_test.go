package specconv

import (
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/kube"
)

// TestKubeAgentImage: with backend.agent_image every kind of server's
// pod (a command server on backend.image, an image server, an npm
// package server on its base image, and that one's install) runs the
// agent copied from agent_path in the agent image, and the copy's room
// is in the pod's disk limit; a server that overrides agent_image back
// to empty runs the agent from its own image, with no copy.
func TestKubeAgentImage(t *testing.T) {
	src := "version: 1\nbackend:\n  kind: kubernetes\n  namespace: mcp\n  kubeconfig: /k/config\n  image: r/base:1\n" +
		"  agent_image: r/agent:1\n  agent_path: /ko-app/mcpbox\n" +
		"servers:\n  cmd:\n    command: [srv]\n  img:\n    image: r/upstream:2\n    args: [/app/srv]\n" +
		"  mem:\n    package: npm:@modelcontextprotocol/server-memory@2025.4.25\n" +
		"  own:\n    command: [srv]\n    backend: {agent_image: \"\", agent_path: /opt/mcpbox}\n"
	c, err := config.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, po kube.PodOptions, image string) {
		t.Helper()
		if po.Image != image || po.Command[0] != kube.AgentBin || po.Agent == nil ||
			*po.Agent != (kube.AgentCopy{Image: "r/agent:1", Path: "/ko-app/mcpbox"}) {
			t.Errorf("%s: image %q command %q agent %+v", name, po.Image, po.Command, po.Agent)
		}
	}
	check("cmd", KubePod(c, c.Server("cmd")), "r/base:1")
	check("img", KubePod(c, c.Server("img")), "r/upstream:2")
	p := Package{Args: []string{"node", PackageTarget + "/x.js"}}
	po, err := KubePackagePod(c, c.Server("mem"), p)
	if err != nil {
		t.Fatal(err)
	}
	check("mem", po, config.DefaultBaseImages["npm"])
	if po.Install.AgentPath != kube.AgentBin || po.Install.Image != po.Image {
		t.Errorf("install: %+v", po.Install)
	}
	own := KubePod(c, c.Server("own"))
	if own.Agent != nil || own.Command[0] != "/opt/mcpbox" {
		t.Errorf("own: command %q agent %+v", own.Command, own.Agent)
	}
	if got, want := KubePod(c, c.Server("cmd")).Limits.EphemeralStorage, own.Limits.EphemeralStorage+kube.AgentVolumeSize; got != want {
		t.Errorf("ephemeral storage with the copy %d, want %d", got, want)
	}
}
