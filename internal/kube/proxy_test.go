package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestProxyObjects: the egress proxy's Deployment is hardened as a
// server's pod, mounts only its config Secret (read-only) and /tmp; its
// Secret and NetworkPolicy carry the gateway's labels and owner, and the
// policy admits only this gateway's server pods on the proxy port.
func TestProxyObjects(t *testing.T) {
	o := ProxyOptions{Gateway: "gw1", Owner: testOwner(), Image: "r/b:1", Command: ProxyCommand("/mcpbox"),
		ConfigSecret: ProxyName("gw1"), ImagePullSecrets: []string{"regcred"}}
	d := ProxyDeployment(o)
	spec := d.Spec.Template.Spec
	if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("image pull secrets = %+v", spec.ImagePullSecrets)
	}
	c := spec.Containers[0]
	if c.Command[0] != "/mcpbox" || c.Command[1] != "egress-proxy" || c.Command[3] != ProxyConfigDir+"/"+ProxyConfigKey {
		t.Errorf("command = %v", c.Command)
	}
	if p := c.ReadinessProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntValue() != ProxyPort {
		t.Errorf("readiness probe = %+v", p)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
		*sc.AllowPrivilegeEscalation || spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("not hardened: %+v %v", sc, spec.AutomountServiceAccountToken)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	if len(mounts) != 2 || !mounts["config"].ReadOnly || mounts["config"].MountPath != ProxyConfigDir || mounts["tmp"].MountPath != "/tmp" {
		t.Errorf("mounts = %+v", c.VolumeMounts)
	}
	for _, v := range spec.Volumes {
		if v.Name == "config" && (v.Secret == nil || v.Secret.SecretName != ProxyName("gw1") || *v.Secret.DefaultMode != 0o440) {
			t.Errorf("config volume = %+v", v)
		}
	}
	if d.Spec.Template.Labels[LabelRole] != RoleEgress || d.OwnerReferences[0].UID != testOwner().UID {
		t.Errorf("deployment labels/owner: %v %v", d.Spec.Template.Labels, d.OwnerReferences)
	}
	s := ProxySecret("gw1", testOwner(), []byte("{}"))
	if s.Name != ProxyName("gw1") || string(s.Data[ProxyConfigKey]) != "{}" || s.Labels[LabelGateway] != "gw1" ||
		s.OwnerReferences[0].UID != testOwner().UID {
		t.Errorf("secret = %+v", s)
	}
	np := ProxyNetworkPolicy("gw1", testOwner(), nil)
	in := np.Spec.Ingress
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Ingress" || len(in) != 1 || len(in[0].From) != 1 ||
		in[0].From[0].PodSelector.MatchLabels[LabelRole] != RoleServer || in[0].From[0].PodSelector.MatchLabels[LabelGateway] != "gw1" ||
		in[0].Ports[0].Port.IntValue() != ProxyPort || np.Spec.PodSelector.MatchLabels[LabelRole] != RoleEgress {
		t.Errorf("proxy policy = %+v", np.Spec)
	}
}

// TestProxyRegistryObjects: with a TLS Secret the proxy mounts it
// read-only, serves the registration port, and its policy admits the
// gateway (only) to that port; the TLS Secret is the proxy's.
func TestProxyRegistryObjects(t *testing.T) {
	o := ProxyOptions{Gateway: "gw1", Owner: testOwner(), Image: "r/b:1", Command: ProxyCommand("/mcpbox"),
		ConfigSecret: ProxyName("gw1"), TLSSecret: ProxyTLSName("gw1")}
	c := ProxyDeployment(o).Spec.Template.Spec.Containers[0]
	cmd := strings.Join(c.Command, " ")
	if !strings.Contains(cmd, "--registry-listen :3129 --tls-dir "+ProxyTLSDir) || len(c.Ports) != 2 || c.Ports[1].ContainerPort != ProxyRegistryPort {
		t.Errorf("command %q, ports %+v", cmd, c.Ports)
	}
	var tlsMount bool
	for _, m := range c.VolumeMounts {
		tlsMount = tlsMount || m.Name == "tls" && m.MountPath == ProxyTLSDir && m.ReadOnly
	}
	if !tlsMount {
		t.Errorf("mounts = %+v", c.VolumeMounts)
	}
	np := ProxyNetworkPolicy("gw1", testOwner(), GatewayPeers(nil))
	if in := np.Spec.Ingress; len(in) != 2 || in[1].Ports[0].Port.IntValue() != ProxyRegistryPort ||
		in[1].From[0].PodSelector.MatchLabels[LabelRole] != RoleGateway {
		t.Errorf("proxy policy = %+v", np.Spec.Ingress)
	}
	if p := GatewayPeers([]string{"10.1.0.0/16"}); len(p) != 1 || p[0].IPBlock.CIDR != "10.1.0.0/16" {
		t.Errorf("GatewayPeers = %+v", p)
	}
	s := ProxyTLS("gw1", testOwner(), []byte("c"), []byte("k"), []byte("ca"))
	if s.Name != ProxyTLSName("gw1") || s.Labels[LabelRole] != RoleEgress || string(s.Data["tls.key"]) != "k" {
		t.Errorf("tls secret = %+v", s)
	}
}
