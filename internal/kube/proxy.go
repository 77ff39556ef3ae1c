package kube

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Where the egress proxy's pods find their config: the Secret
// ProxySecret makes, mounted read-only (mcpbox egress-proxy --config).
const (
	ProxyConfigDir = "/run/mcpbox/egress"
	ProxyConfigKey = "config.json"
	// ProxyTLSDir holds the proxy's certificate for its registration
	// port (the Secret ProxyTLS makes): mcpbox egress-proxy --tls-dir.
	ProxyTLSDir = "/run/mcpbox/egress-tls"
	// ProxyRegistryPort is where the gateway registers the pods'
	// secrets added at the proxy (mutual TLS, the gateway only).
	ProxyRegistryPort = 3129
)

// ProxyCommand is the egress proxy container's command: mcpbox at
// agentPath in its image, serving on every address of the pod.
func ProxyCommand(agentPath string) []string {
	return []string{agentPath, "egress-proxy", "--config", ProxyConfigDir + "/" + ProxyConfigKey}
}

// ProxySecret is the Secret of the egress proxy's config (its token key
// and the servers' allowlists): mounted into the proxy's pods only.
func ProxySecret(gateway string, owner metav1.OwnerReference, config []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: ProxyName(gateway), Labels: Labels(gateway, "", RoleEgress),
			OwnerReferences: []metav1.OwnerReference{owner}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{ProxyConfigKey: config},
	}
}

// ProxyNetworkPolicy admits to the egress proxy's pods only this
// gateway's server pods, on the proxy's port; their egress is the
// proxy's own decision (it refuses internal ranges itself).
//
// registryFrom, if not nil, are the peers the gateway connects from
// (GatewayPeers), admitted to the registration port.
func ProxyNetworkPolicy(gateway string, owner metav1.OwnerReference, registryFrom []networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port, reg := intstr.FromInt32(ProxyPort), intstr.FromInt32(ProxyRegistryPort)
	np := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: ProxyName(gateway), Labels: Labels(gateway, "", RoleEgress),
			OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: Labels(gateway, "", RoleEgress)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{LabelGateway: gateway, LabelRole: RoleServer}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	if registryFrom != nil {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			From: registryFrom, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &reg}}})
	}
	return np
}

// GatewayPeers are the NetworkPolicy peers the gateway connects from:
// the CIDRs, or with none the namespace's pods labelled
// mcpbox.dev/role=gateway.
func GatewayPeers(cidrs []string) []networkingv1.NetworkPolicyPeer {
	if p := CIDRPeers(cidrs); p != nil {
		return p
	}
	return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{LabelRole: RoleGateway}}}}
}

// ProxyTLSName is the name of the proxy's TLS Secret (ProxyTLS).
func ProxyTLSName(gateway string) string { return ProxyName(gateway) + "-tls" }

// ProxyTLS is the Secret of the proxy's registration certificate: its
// certificate and key (from the gateway's pod CA, naming ProxyName) and
// the CA's certificate. It holds no secret of a server and no
// interception key: those reach the proxy's memory over mutual TLS.
func ProxyTLS(gateway string, owner metav1.OwnerReference, certPEM, keyPEM, caPEM []byte) *corev1.Secret {
	s := PodTLS(ProxyTLSName(gateway), gateway, "", owner, certPEM, keyPEM, caPEM)
	s.Labels = Labels(gateway, "", RoleEgress)
	return s
}

// ProxyOptions describe the egress proxy of a gateway: a Deployment of
// the mcpbox image in proxy mode and a Service in front of it.
type ProxyOptions struct {
	Gateway  string
	Owner    metav1.OwnerReference
	Image    string
	Command  []string
	Replicas int32 // zero: 2
	// ImagePullSecrets are the pods' (backend.image_pull_secrets: the
	// image may be a private agent_image).
	ImagePullSecrets []string
	Limits           Limits
	// ConfigSecret, if set, is the Secret (ProxySecret) mounted
	// read-only at ProxyConfigDir.
	ConfigSecret string
	// TLSSecret, if set, is the Secret (ProxyTLS) mounted read-only at
	// ProxyTLSDir, and the proxy serves its registration port.
	TLSSecret string
}

// ProxyName is the name of gateway's egress proxy Deployment and Service.
func ProxyName(gateway string) string { return "mcpbox-egress-" + gateway }

// ProxyDeployment builds the egress proxy's Deployment, hardened as a
// server's pod (not root, read-only root, no capabilities, no token).
func ProxyDeployment(o ProxyOptions) *appsv1.Deployment {
	n := o.Replicas
	if n == 0 {
		n = 2
	}
	labels := Labels(o.Gateway, "", RoleEgress)
	pod := Pod(PodOptions{Name: ProxyName(o.Gateway), Gateway: o.Gateway, Image: o.Image, Command: o.Command,
		Owner: o.Owner, Limits: o.Limits, ImagePullSecrets: o.ImagePullSecrets})
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	c := &pod.Spec.Containers[0]
	c.Name = "proxy"
	c.Ports = []corev1.ContainerPort{{Name: "proxy", ContainerPort: ProxyPort, Protocol: corev1.ProtocolTCP}}
	// The proxy has no unauthenticated endpoint: ready is listening.
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
		Port: intstr.FromInt32(ProxyPort)}}, PeriodSeconds: 5}
	// The proxy has no TLS material of a pod and no secrets dir.
	pod.Spec.Volumes = pod.Spec.Volumes[:1]
	c.VolumeMounts = c.VolumeMounts[:1]
	if o.ConfigSecret != "" {
		mode := int32(0o440)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: o.ConfigSecret, DefaultMode: &mode}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: ProxyConfigDir, ReadOnly: true})
	}
	if o.TLSSecret != "" {
		mode := int32(0o440)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: o.TLSSecret, DefaultMode: &mode}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: ProxyTLSDir, ReadOnly: true})
		c.Command = append(c.Command, "--registry-listen", ":"+strconv.Itoa(ProxyRegistryPort), "--tls-dir", ProxyTLSDir)
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "registry", ContainerPort: ProxyRegistryPort, Protocol: corev1.ProtocolTCP})
	}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: ProxyName(o.Gateway), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{o.Owner}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
}

// ProxyService builds the Service in front of the egress proxy.
func ProxyService(o ProxyOptions) *corev1.Service {
	labels := Labels(o.Gateway, "", RoleEgress)
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ProxyName(o.Gateway), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{o.Owner}},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports: []corev1.ServicePort{{Name: "proxy", Port: ProxyPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(ProxyPort)}},
		},
	}
}
