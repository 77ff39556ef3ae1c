package specconv

import (
	"slices"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/kube"
)

// TestKubePackagePod: an npm package server's pod runs on the npm base
// image, the server's command is the installed bin under the package
// dir (where the install container puts the tree), and the tree's room
// is in the pod's disk limit; a pypi package or one not installed is an
// error.
func TestKubePackagePod(t *testing.T) {
	src := "version: 1\nbackend:\n  kind: kubernetes\n  namespace: mcp\n  kubeconfig: /k/config\n  agent_path: /mcpbox\n" +
		"servers:\n  mem:\n    package: npm:@modelcontextprotocol/server-memory@2025.4.25\n    args: [--x]\n"
	c, err := config.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server("mem")
	p := Package{Dir: "/state/packages/npm/x", Args: []string{"node", PackageTarget + "/node_modules/@modelcontextprotocol/server-memory/dist/index.js", "--x"}}
	po, err := KubePackagePod(c, s, p)
	if err != nil {
		t.Fatal(err)
	}
	if PackageTarget != kube.PackageDir {
		t.Fatalf("the sandbox's package dir %s is not the pod's %s", PackageTarget, kube.PackageDir)
	}
	if po.Image != config.DefaultBaseImages["npm"] || po.Install == nil || po.Install.Image != po.Image || po.Install.AgentPath != "/mcpbox" {
		t.Errorf("pod: image %q install %+v", po.Image, po.Install)
	}
	if i := slices.Index(po.Command, "--"); i < 0 || !slices.Equal(po.Command[i+1:], p.Args) || po.Command[0] != "/mcpbox" {
		t.Errorf("command = %q", po.Command)
	}
	if plain := KubePod(c, s); po.Limits.EphemeralStorage != plain.Limits.EphemeralStorage+KubeInstallSize {
		t.Errorf("ephemeral storage %d, want the tree's %d more than %d", po.Limits.EphemeralStorage, KubeInstallSize, plain.Limits.EphemeralStorage)
	}
	if _, err := KubePackagePod(c, s, Package{}); err == nil {
		t.Error("a package not installed made a pod")
	}
	py := *s
	py.Package = "pypi:mcp-server-time@1.0.0"
	if _, err := KubePackagePod(c, &py, p); err == nil {
		t.Error("a pypi package made a pod")
	}
}
