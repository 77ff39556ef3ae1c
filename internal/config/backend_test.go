package config

import (
	"strings"
	"testing"
)

const kubeTop = "version: 1\nbackend:\n  kind: kubernetes\n  namespace: mcp\n  kubeconfig: /k/config\n"

// TestBackendKubernetes loads a kubernetes backend, a server's override,
// and prints both back.
func TestBackendKubernetes(t *testing.T) {
	src := kubeTop + "  runtime_class: gvisor\n  image_pull_secrets: [reg]\n  node_selector: {pool: mcp}\n" +
		"  tolerations: [{key: mcp, operator: Exists, effect: NoSchedule}]\n  agent_path: /mcpbox\n  image: reg.example/base:1\n  agent_image: reg.example/agent:1\n" +
		"servers:\n  a:\n    command: [srv]\n    network: {egress: [{host: api.example.com}]}\n  b:\n    image: reg.example/b:1\n    args: [/app/srv]\n    backend: {namespace: other, runtime_class: kata, agent_image: reg.example/agent:2}\n" +
		"  c:\n    command: [local-srv]\n    backend: {kind: local}\n  d:\n    url: https://x.example/mcp\n"
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.BackendOf(c.Server("a")), c.BackendOf(c.Server("b"))
	if a.Kind != BackendKubernetes || a.Namespace != "mcp" || a.RuntimeClass != "gvisor" || a.Image != "reg.example/base:1" || a.AgentImage != "reg.example/agent:1" ||
		len(a.Tolerations) != 1 || a.Tolerations[0].Operator != "Exists" || a.NodeSelector[0].Name != "pool" {
		t.Errorf("a: %+v", a)
	}
	if b.Namespace != "other" || b.RuntimeClass != "kata" || b.Kubeconfig != "/k/config" || b.AgentPath != "/mcpbox" || b.AgentImage != "reg.example/agent:2" {
		t.Errorf("b: %+v", b)
	}
	if c.IsKubernetes(c.Server("c")) {
		t.Error("c: override to local lost")
	}
	// A pod's egress goes through the gateway's egress proxy.
	if eg := c.Server("a").Network.Egress; len(eg) != 1 || eg[0].Host != "api.example.com" {
		t.Errorf("a's egress: %+v", eg)
	}
	c2, out := reload(t, c)
	if got := c2.BackendOf(c2.Server("b")); got.Namespace != "other" || got.RuntimeClass != "kata" || len(got.Tolerations) != 1 ||
		got.AgentImage != "reg.example/agent:2" || c2.Backend.AgentImage != "reg.example/agent:1" {
		t.Errorf("round trip: %+v\n%s", got, out)
	}
}

// TestBackendPackageServer: an npm package server runs on kubernetes on
// the npm base image (the default, or base_images' own), which a server's
// backend overrides and a round trip keeps.
func TestBackendPackageServer(t *testing.T) {
	src := kubeTop + "servers:\n  m:\n    package: npm:@modelcontextprotocol/server-memory@2025.4.25\n" +
		"  n:\n    package: npm:left-pad@1.3.0\n    backend: {base_images: {npm: reg.example/node-agent:22}}\n"
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.BackendOf(c.Server("m")).BaseImage("npm"), DefaultBaseImages["npm"]; got != want || want == "" {
		t.Errorf("m's npm base image %q, want the default %q", got, want)
	}
	if got := c.BackendOf(c.Server("n")).BaseImage("npm"); got != "reg.example/node-agent:22" {
		t.Errorf("n's npm base image %q", got)
	}
	c2, out := reload(t, c)
	if got := c2.BackendOf(c2.Server("n")).BaseImage("npm"); got != "reg.example/node-agent:22" {
		t.Errorf("round trip: %q\n%s", got, out)
	}
}

// TestBackendInvalid checks the refusals: bad values, and what a pod
// cannot do for a server (fail closed at load).
func TestBackendInvalid(t *testing.T) {
	srv := "servers:\n  s:\n    command: [srv]\n"
	tests := []struct{ name, yaml, want string }{
		{"kind", "version: 1\nbackend: {kind: nomad}\n" + srv, `backend.kind: "nomad": want local or kubernetes`},
		{"no namespace", "version: 1\nbackend: {kind: kubernetes, in_cluster: true, image: r/b:1}\n" + srv, "no backend.namespace"},
		{"no credentials", "version: 1\nbackend: {kind: kubernetes, namespace: x, image: r/b:1}\n" + srv, "backend needs kubeconfig: FILE or in_cluster: true"},
		{"both credentials", kubeTop + "  in_cluster: true\n  image: r/b:1\n" + srv, "kubeconfig and in_cluster: true are exclusive"},
		{"namespace", "version: 1\nbackend: {kind: kubernetes, namespace: Bad_NS, in_cluster: true, image: r/b:1}\n" + srv, `"Bad_NS" is not a namespace name`},
		{"local keys", "version: 1\nbackend: {kind: local, namespace: x}\n" + srv, "backend.namespace: only applies to kind: kubernetes"},
		{"no image", kubeTop + srv, "needs backend.image"},
		{"toleration", kubeTop + "  image: r/b:1\n  tolerations: [{key: k, operator: Maybe}]\n" + srv, `operator: "Maybe": want Equal or Exists`},
		{"claim", kubeTop + "  image: r/b:1\n  input_claim: Bad/Claim\n" + srv, "is not a PersistentVolumeClaim name"},
		{"cidr", kubeTop + "  image: r/b:1\n  gateway_cidrs: [10.0.0.1/8]\n" + srv, "want a CIDR"},
		{"agent path", kubeTop + "  image: r/b:1\n  agent_path: mcpbox\n" + srv, "want an absolute path in the image"},
		{"agent image", kubeTop + "  image: r/b:1\n  agent_image: \"reg.example/agent:1 \"\n" + srv, "backend.agent_image: \"reg.example/agent:1 \" must not contain whitespace"},
		{"agent image local", "version: 1\nbackend: {kind: local, agent_image: r/a:1}\n" + srv, "backend.agent_image: only applies to kind: kubernetes"},
		{"forward", kubeTop + "  image: r/b:1\n" + srv + "    network: {forward: [{listen: 127.0.0.1:5432, to: db.internal:5432}]}\n", "network.forward is the local sandbox's"},
		{"input", kubeTop + "  image: r/b:1\n" + srv + "    filesystem: {input: {source: .}}\n", "filesystem.input is a host directory"},
		{"inject without egress", kubeTop + "  image: r/b:1\n" + srv + "    secrets: {T: {from: env:T, inject: {hosts: [a.example], header: X}}}\n", "is not allowed by servers.s.network.egress"},
		{"builtin", kubeTop + "  image: r/b:1\nservers:\n  w:\n    builtin: workspace\n", "the built-in server runs on this host only"},
		{"image args", kubeTop + "  image: r/b:1\nservers:\n  i:\n    image: r/i:1\n", "an image server needs args"},
		{"group", kubeTop + "  image: r/b:1\n" + srv + "    placement: group:g\n", "groups share a local sandbox"},
		{"pypi package", kubeTop + "servers:\n  p:\n    package: pypi:mcp-server-time@1.0.0\n", "only npm packages are installed into pods"},
		{"base image kind", kubeTop + "  base_images: {cargo: r/c:1}\n" + srv, `base_images: "cargo": want npm or pypi`},
		{"base image ref", kubeTop + "  image: r/b:1\n  base_images: {npm: \"bad ref\"}\n" + srv, "base_images.npm"},
		{"kube secret local", "version: 1\n" + srv + "    secrets: {T: {from: kubernetes:gh/token}}\n", "secrets.T.from: a kubernetes: Secret is read only for a server on backend kind: kubernetes (this one runs on this host)"},
		{"kube secret local override", kubeTop + "  image: r/b:1\n" + srv + "    backend: {kind: local}\n    secrets: {T: {from: kubernetes:gh/token}}\n", "(this one runs on this host)"},
		{"kube secret syntax", kubeTop + "  image: r/b:1\n" + srv + "    secrets: {T: {from: kubernetes:gh}}\n", "want kubernetes:SECRET/KEY"},
		{"kube secret inject aws", kubeTop + "  image: r/b:1\n" + srv + "    network: {egress: [{host: a.example}]}\n    secrets: {T: {inject: {hosts: [a.example], aws: {access_key_id: kubernetes:aws/id, secret_access_key: env:S}}}}\n", "only for a server secret on the kubernetes backend"},
		{"kube client token", "version: 1\nclients: [{name: a, token: {from: kubernetes:t/k}}]\n" + srv, "only for a server secret on the kubernetes backend"},
		{"url kind", "version: 1\nservers:\n  s:\n    url: https://x.example/mcp\n    backend: {kind: kubernetes, namespace: x, in_cluster: true}\n", "a url server runs elsewhere already"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "t.yaml:") {
				t.Errorf("error has no position: %v", err)
			}
		})
	}
}

// TestKubeSecretRefs: kubernetes:SECRET/KEY references, added at the
// proxy (inject) or not, are listed per namespace (the Role's
// resourceNames), without repeats, and survive a round trip.
func TestKubeSecretRefs(t *testing.T) {
	src := kubeTop + "  image: r/b:1\nservers:\n" +
		"  a:\n    command: [a]\n    secrets: {T: {from: kubernetes:gh/token}, U: {from: kubernetes:db.creds/pass-word_1, as: file}, V: {from: env:V}}\n" +
		"  b:\n    command: [b]\n    network: {egress: [{host: api.example}]}\n" +
		"    secrets: {T: {from: kubernetes:gh/token}, W: {from: kubernetes:api/key, inject: {hosts: [api.example], header: X-Key}}}\n" +
		"  c:\n    command: [c]\n    backend: {namespace: other}\n    secrets: {T: {from: kubernetes:elsewhere/k}}\n"
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range c.KubeSecretRefs("mcp") {
		got = append(got, r.String())
	}
	if want := "kubernetes:api/key kubernetes:db.creds/pass-word_1 kubernetes:gh/token"; strings.Join(got, " ") != want {
		t.Errorf("mcp's refs %q, want %q", got, want)
	}
	if o := c.KubeSecretRefs("other"); len(o) != 1 || o[0] != (KubeSecretRef{Secret: "elsewhere", Key: "k"}) {
		t.Errorf("other's refs %v", o)
	}
	c2, out := reload(t, c)
	if len(c2.KubeSecretRefs("mcp")) != 3 {
		t.Errorf("round trip lost references:\n%s", out)
	}
}

// TestParseKubeSecretRef checks the syntax, and that the other parser
// refuses the scheme (a client token or header cannot read a Secret).
func TestParseKubeSecretRef(t *testing.T) {
	tests := []struct {
		ref     string
		ok      bool
		want    KubeSecretRef
		wantErr string
	}{
		{"kubernetes:gh/token", true, KubeSecretRef{"gh", "token"}, ""},
		{"kubernetes:a.b-c/.dot_key-1", true, KubeSecretRef{"a.b-c", ".dot_key-1"}, ""},
		{"env:X", false, KubeSecretRef{}, ""},
		{"kube:gh/token", false, KubeSecretRef{}, ""},
		{"kubernetes:gh", true, KubeSecretRef{}, "want kubernetes:SECRET/KEY"},
		{"kubernetes:/k", true, KubeSecretRef{}, "is not a Secret name"},
		{"kubernetes:GH/k", true, KubeSecretRef{}, "is not a Secret name"},
		{"kubernetes:gh/", true, KubeSecretRef{}, "is not a key"},
		{"kubernetes:gh/a/b", true, KubeSecretRef{}, "is not a key"},
		{"kubernetes:gh/..", true, KubeSecretRef{}, "is not a key"},
		{"kubernetes:gh/a b", true, KubeSecretRef{}, "is not a key"},
	}
	for _, tc := range tests {
		r, ok, err := ParseKubeSecretRef(tc.ref)
		switch {
		case ok != tc.ok || r != tc.want:
			t.Errorf("%q: %+v ok=%v, want %+v ok=%v", tc.ref, r, ok, tc.want, tc.ok)
		case tc.wantErr == "" && err != nil, tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want %q", tc.ref, err, tc.wantErr)
		}
	}
	if _, err := ParseSecretRef("kubernetes:gh/token"); err == nil || !strings.Contains(err.Error(), "only for a server secret on the kubernetes backend") {
		t.Errorf("ParseSecretRef(kubernetes:...) = %v, want a refusal", err)
	}
}

// reload marshals c and loads the output again, as t.yaml; it returns
// the loaded config and the YAML.
func reload(t *testing.T, c *Config) (*Config, []byte) {
	t.Helper()
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Load("t.yaml", out)
	if err != nil {
		t.Fatalf("reloading %s: %v", out, err)
	}
	return c2, out
}
