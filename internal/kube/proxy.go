package kube

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ProxyOptions describe the egress proxy of a gateway: a Deployment of
// the mcpbox image in proxy mode and a Service in front of it.
type ProxyOptions struct {
	Gateway  string
	Owner    metav1.OwnerReference
	Image    string
	Command  []string
	Replicas int32 // zero: 2
	Limits   Limits
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
		Owner: o.Owner, Limits: o.Limits})
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	c := &pod.Spec.Containers[0]
	c.Name = "proxy"
	c.Ports = []corev1.ContainerPort{{Name: "proxy", ContainerPort: ProxyPort, Protocol: corev1.ProtocolTCP}}
	// The proxy has no TLS material of a pod and no secrets dir.
	pod.Spec.Volumes = pod.Spec.Volumes[:1]
	c.VolumeMounts = c.VolumeMounts[:1]
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
