package kube

import (
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
func ProxyNetworkPolicy(gateway string, owner metav1.OwnerReference) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(ProxyPort)
	return &networkingv1.NetworkPolicy{
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
