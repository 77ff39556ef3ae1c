package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testOwner() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: OwnerName("gw1"), UID: "u-1"}
}

// TestPodHardened checks every hardening of a server's pod, also when
// options try to loosen nothing (there are no options to loosen it).
func TestPodHardened(t *testing.T) {
	p := Pod(PodOptions{Name: "p", Gateway: "gw1", Server: "Git Hub", Scope: "abc", Owner: testOwner(),
		Image: "img", Command: AgentCommand("/mcpbox", []string{"srv"}), TLSSecret: "p-tls",
		Limits: Limits{CPU: 0.5, Memory: 256 << 20, EphemeralStorage: 1 << 30}, TmpSize: 32 << 20,
		Output: true, OutputSize: 1 << 30, RuntimeClass: "gvisor", ImagePullSecrets: []string{"reg"},
		NodeSelector: map[string]string{"pool": "mcp"}, Tolerations: []corev1.Toleration{{Key: "mcp", Operator: "Exists"}}})
	s := p.Spec
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Error("service-account token mounted")
	}
	if s.HostNetwork || s.HostPID || s.HostIPC {
		t.Error("host namespace shared")
	}
	if s.SecurityContext.RunAsNonRoot == nil || !*s.SecurityContext.RunAsNonRoot || *s.SecurityContext.RunAsUser != RunAsUser {
		t.Error("pod may run as root")
	}
	if len(s.Containers) != 1 {
		t.Fatalf("containers = %d", len(s.Containers))
	}
	c := s.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container security context")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Privileged == nil || *sc.Privileged:
		t.Error("privileged")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
		t.Errorf("capabilities = %+v", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("no RuntimeDefault seccomp")
	}
	lim := c.Resources.Limits
	if lim.Cpu().MilliValue() != 500 || lim.Memory().Value() != 256<<20 || lim.StorageEphemeral().Value() != 1<<30 {
		t.Errorf("limits = %v", lim)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range s.Volumes {
		vols[v.Name] = v
	}
	if ed := vols["tmp"].EmptyDir; ed == nil || ed.SizeLimit.Value() != 32<<20 {
		t.Errorf("tmp = %+v", vols["tmp"])
	}
	if ed := vols["secrets"].EmptyDir; ed == nil || ed.Medium != corev1.StorageMediumMemory || ed.SizeLimit == nil {
		t.Errorf("secrets dir = %+v", vols["secrets"])
	}
	if sv := vols["tls"].Secret; sv == nil || sv.SecretName != "p-tls" {
		t.Errorf("tls = %+v", vols["tls"])
	}
	if ed := vols["output"].EmptyDir; ed == nil || ed.SizeLimit.Value() != 1<<30 {
		t.Errorf("output = %+v", vols["output"])
	}
	for _, m := range c.VolumeMounts {
		if m.Name == "tls" && !m.ReadOnly {
			t.Error("tls mount writable")
		}
	}
	if *s.RuntimeClassName != "gvisor" || s.ImagePullSecrets[0].Name != "reg" || s.NodeSelector["pool"] != "mcp" || len(s.Tolerations) != 1 {
		t.Errorf("scheduling = %v %v %v %v", *s.RuntimeClassName, s.ImagePullSecrets, s.NodeSelector, s.Tolerations)
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "u-1" {
		t.Errorf("owner = %v", p.OwnerReferences)
	}
	want := map[string]string{LabelManagedBy: "mcpbox", LabelGateway: "gw1", LabelRole: RoleServer, LabelScope: "abc"}
	for k, v := range want {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.Labels[k], v)
		}
	}
	if p.Labels[LabelServer] == "Git Hub" || p.Annotations[AnnotationServer] != "Git Hub" {
		t.Errorf("server label %q annotation %q", p.Labels[LabelServer], p.Annotations[AnnotationServer])
	}
	for _, e := range c.Env {
		if e.Name == "MCPBOX_POD_IP" && (e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP") {
			t.Error("pod IP not from the downward API")
		}
	}
	if !strings.Contains(strings.Join(c.Command, " "), "--listen $(MCPBOX_POD_IP):8443") {
		t.Errorf("command = %v", c.Command)
	}
}

// TestPodInputReadOnly: a claimed input is mounted read-only, at the
// volume and the mount.
func TestPodInputReadOnly(t *testing.T) {
	p := Pod(PodOptions{Name: "p", Gateway: "g", Server: "s", InputClaim: "in", OutputClaim: "out"})
	for _, v := range p.Spec.Volumes {
		if v.Name == "input" && !v.PersistentVolumeClaim.ReadOnly {
			t.Error("input claim writable")
		}
	}
	n := 0
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		switch m.Name {
		case "input":
			n++
			if !m.ReadOnly || m.MountPath != InputDir {
				t.Errorf("input mount %+v", m)
			}
		case "output":
			n++
			if m.ReadOnly || m.MountPath != OutputDir {
				t.Errorf("output mount %+v", m)
			}
		}
	}
	if n != 2 {
		t.Errorf("mounts %d of 2", n)
	}
}

// TestNetworkPolicy: ingress from the gateway to the agent's port only;
// no egress, or the proxy's port of this gateway's proxy only.
func TestNetworkPolicy(t *testing.T) {
	for _, proxy := range []bool{false, true} {
		np := NetworkPolicy(PolicyOptions{Gateway: "gw1", Server: "s", Owner: testOwner(), Proxy: proxy})
		if len(np.Spec.PolicyTypes) != 2 {
			t.Errorf("policy types %v", np.Spec.PolicyTypes)
		}
		if np.Spec.PodSelector.MatchLabels[LabelGateway] != "gw1" || np.Spec.PodSelector.MatchLabels[LabelServer] != "s" {
			t.Errorf("selector %v", np.Spec.PodSelector)
		}
		if len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != AgentPort ||
			np.Spec.Ingress[0].From[0].PodSelector.MatchLabels[LabelRole] != RoleGateway {
			t.Errorf("ingress %+v", np.Spec.Ingress)
		}
		switch {
		case !proxy && (np.Spec.Egress == nil || len(np.Spec.Egress) != 0):
			t.Errorf("egress without proxy %+v", np.Spec.Egress)
		case proxy && (len(np.Spec.Egress) != 1 || np.Spec.Egress[0].Ports[0].Port.IntValue() != ProxyPort ||
			np.Spec.Egress[0].To[0].PodSelector.MatchLabels[LabelRole] != RoleEgress ||
			np.Spec.Egress[0].To[0].IPBlock != nil || np.Spec.Egress[0].To[0].NamespaceSelector != nil):
			t.Errorf("egress with proxy %+v", np.Spec.Egress)
		}
	}
}

func TestLabelValue(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"github", "Git Hub", "git-hub", "git_hub", "", "-x-", strings.Repeat("a", 80), strings.Repeat("a", 81)} {
		v := LabelValue(s, 63)
		if len(v) == 0 || len(v) > 63 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
			strings.HasPrefix(v, "-") || strings.HasSuffix(v, "-") {
			t.Errorf("LabelValue(%q) = %q", s, v)
		}
		if prev, dup := seen[v]; dup {
			t.Errorf("LabelValue(%q) = LabelValue(%q) = %q", s, prev, v)
		}
		seen[v] = s
	}
	if LabelValue("github", 63) != "github" {
		t.Error("a valid value changed")
	}
}

func TestRBACYAML(t *testing.T) {
	y, err := RBAC("team", "system:serviceaccount:team:mcpbox")
	if err != nil {
		t.Fatal(err)
	}
	s := string(y)
	for _, want := range []string{"kind: Role\n", "kind: RoleBinding\n", "kind: ServiceAccount", "namespace: team", "networkpolicies", "leases"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	if strings.Contains(s, "- '*'") || strings.Contains(s, "- \"*\"") {
		t.Errorf("wildcard in\n%s", s)
	}
}

func TestLoadKubeconfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := `apiVersion: v1
kind: Config
current-context: b
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: ca.pem}
users:
- name: u
  user: {token: tok, client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
contexts:
- name: a
  context: {cluster: x, user: y}
- name: b
  context: {cluster: c, user: u, namespace: ns1}
`
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadKubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "https://127.0.0.1:6443" || string(cfg.CA) != "CA" || cfg.Token != "tok" ||
		string(cfg.CertPEM) != "CERT" || string(cfg.KeyPEM) != "KEY" || cfg.Namespace != "ns1" {
		t.Errorf("cfg = %+v", cfg)
	}
	for name, bad := range map[string]string{
		"insecure": strings.Replace(kc, "certificate-authority: ca.pem", "insecure-skip-tls-verify: true", 1),
		"exec":     strings.Replace(kc, "token: tok,", "exec: {command: x},", 1),
		"context":  strings.Replace(kc, "current-context: b", "current-context: z", 1),
	} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadKubeconfig(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(Config{Server: "http://127.0.0.1:1"}); err == nil {
		t.Error("plain HTTP accepted")
	}
}

// TestPodInstall: a package server's pod installs in an init container
// as hardened as the server's, from the package's ConfigMap, into an
// emptyDir the server mounts read-only; the install's secrets dir is its
// own (the server never sees what the gateway sent the install).
func TestPodInstall(t *testing.T) {
	p := Pod(PodOptions{Name: "p", Gateway: "gw1", Server: "mem", Scope: "abc", Owner: testOwner(),
		Image: "node:22", Command: AgentCommand("/mcpbox", []string{"node", PackageDir + "/node_modules/x/index.js"}),
		TLSSecret: "p-tls", Limits: Limits{CPU: 0.5, Memory: 256 << 20},
		Install: &Install{Image: "node:22", ConfigMap: "p-pkg", AgentPath: "/mcpbox"}})
	if len(p.Spec.InitContainers) != 1 {
		t.Fatalf("init containers: %d", len(p.Spec.InitContainers))
	}
	ic, srv := p.Spec.InitContainers[0], p.Spec.Containers[0]
	sc := ic.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || *sc.Privileged || !*sc.RunAsNonRoot ||
		*sc.RunAsUser != RunAsUser || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("install container's security context: %+v", sc)
	}
	if ic.Resources.Limits.Memory().Value() != 256<<20 {
		t.Errorf("install container's limits: %v", ic.Resources.Limits)
	}
	mounts := func(c corev1.Container) map[string]corev1.VolumeMount {
		m := map[string]corev1.VolumeMount{}
		for _, vm := range c.VolumeMounts {
			m[vm.Name] = vm
		}
		return m
	}
	im, sm := mounts(ic), mounts(srv)
	if vm := im["pkg"]; vm.MountPath != PackageDir || vm.ReadOnly {
		t.Errorf("install's package mount: %+v", vm)
	}
	if vm := sm["pkg"]; vm.MountPath != PackageDir || !vm.ReadOnly {
		t.Errorf("server's package mount: %+v (want read-only)", vm)
	}
	if vm := im["pkg-lock"]; vm.MountPath != LockDir || !vm.ReadOnly {
		t.Errorf("install's lock mount: %+v", vm)
	}
	for _, name := range []string{"pkg-lock", "install-secrets"} {
		if _, ok := sm[name]; ok {
			t.Errorf("the server mounts %s", name)
		}
	}
	if _, ok := im["secrets"]; ok {
		t.Error("the install mounts the server's secrets dir")
	}
	cmd := strings.Join(ic.Command, " ")
	if !strings.HasPrefix(cmd, "/mcpbox agent --once ") || !strings.Contains(cmd, "--secrets-dir "+InstallSecretsDir+" ") ||
		strings.Contains(cmd, SecretsDir+" ") || !strings.Contains(cmd, "npm ci --ignore-scripts") {
		t.Errorf("install command: %q", cmd)
	}
	for _, v := range p.Spec.Volumes {
		switch v.Name {
		case "pkg-lock":
			if v.ConfigMap == nil || v.ConfigMap.Name != "p-pkg" {
				t.Errorf("lock volume: %+v", v)
			}
		case "install-secrets":
			if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
				t.Errorf("install secrets volume: %+v", v)
			}
		case "pkg":
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
				t.Errorf("package volume: %+v", v)
			}
		}
	}
	cm := PackageConfigMap("p-pkg", "gw1", "mem", testOwner(), []byte(`{"a":1}`), []byte(`{"lockfileVersion":3}`))
	if cm.Immutable == nil || !*cm.Immutable || len(cm.OwnerReferences) != 1 || cm.Labels[LabelGateway] != "gw1" ||
		cm.Data["package-lock.json"] != `{"lockfileVersion":3}` {
		t.Errorf("configmap: %+v", cm)
	}
}

// TestPodAgentCopy: with PodOptions.Agent, the first init container runs
// the agent image's mcpbox to copy itself into a size-capped disk
// emptyDir, hardened as the server's container and with small limits of
// its own; the server and the install container run the copy from a
// read-only mount of it, and only the copying container may write it.
func TestPodAgentCopy(t *testing.T) {
	p := Pod(PodOptions{Name: "p", Gateway: "gw1", Server: "mem", Scope: "abc", Owner: testOwner(),
		Image: "node:22", Command: AgentCommand(AgentBin, []string{"node", "x.js"}),
		TLSSecret: "p-tls", Limits: Limits{CPU: 2, Memory: 1 << 30},
		Install: &Install{Image: "node:22", ConfigMap: "p-pkg", AgentPath: AgentBin},
		Agent:   &AgentCopy{Image: "reg.example/mcpbox-agent@sha256:abc", Path: "/mcpbox"}})
	if n := len(p.Spec.InitContainers); n != 2 {
		t.Fatalf("init containers: %d, want the agent's and the install's", n)
	}
	ac, srv := p.Spec.InitContainers[0], p.Spec.Containers[0]
	if ac.Name != AgentContainer || ac.Image != "reg.example/mcpbox-agent@sha256:abc" ||
		strings.Join(ac.Command, " ") != "/mcpbox agent --copy-to "+AgentBin {
		t.Errorf("agent container: %s %s %q", ac.Name, ac.Image, ac.Command)
	}
	if p.Spec.InitContainers[1].Name != InstallContainer {
		t.Errorf("second init container %s, want the install after the copy", p.Spec.InitContainers[1].Name)
	}
	sc := ac.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || *sc.Privileged || !*sc.RunAsNonRoot ||
		*sc.RunAsUser != RunAsUser || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("agent container's security context: %+v", sc)
	}
	if sc == srv.SecurityContext {
		t.Error("the agent container shares the server's security context object")
	}
	lim, req := ac.Resources.Limits, ac.Resources.Requests
	if lim.Cpu().MilliValue() != 500 || lim.Memory().Value() != 128<<20 || lim.StorageEphemeral().Value() != 16<<20 ||
		!req.Memory().Equal(*lim.Memory()) {
		t.Errorf("agent container's resources: %+v", ac.Resources)
	}
	if len(ac.VolumeMounts) != 1 || ac.VolumeMounts[0].Name != "agent" || ac.VolumeMounts[0].MountPath != AgentDir || ac.VolumeMounts[0].ReadOnly {
		t.Errorf("agent container's mounts: %+v (want only the agent dir, writable)", ac.VolumeMounts)
	}
	for _, c := range append([]corev1.Container{p.Spec.InitContainers[1]}, p.Spec.Containers...) {
		n := 0
		for _, vm := range c.VolumeMounts {
			if vm.Name == "agent" {
				n++
				if vm.MountPath != AgentDir || !vm.ReadOnly {
					t.Errorf("%s mounts the agent %+v, want read-only at %s", c.Name, vm, AgentDir)
				}
			}
		}
		if n != 1 || c.Command[0] != AgentBin {
			t.Errorf("%s: %d agent mounts, command %q; want one, running %s", c.Name, n, c.Command, AgentBin)
		}
	}
	var vol *corev1.Volume
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Name == "agent" {
			vol = &p.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.EmptyDir == nil || vol.EmptyDir.Medium != corev1.StorageMediumDefault ||
		vol.EmptyDir.SizeLimit == nil || vol.EmptyDir.SizeLimit.Value() != AgentVolumeSize {
		t.Errorf("agent volume: %+v", vol)
	}
	// Without Agent the image has it: no copy, no volume.
	p = Pod(PodOptions{Name: "p", Image: "img", Command: AgentCommand("/mcpbox", []string{"srv"}), TLSSecret: "t"})
	if len(p.Spec.InitContainers) != 0 {
		t.Errorf("init containers without Agent: %d", len(p.Spec.InitContainers))
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == "agent" {
			t.Error("agent volume without Agent")
		}
	}
}
