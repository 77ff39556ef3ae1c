package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The labels of every object mcpbox makes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by" // always ManagedBy
	LabelGateway   = "mcpbox.dev/gateway"           // the gateway's id
	LabelServer    = "mcpbox.dev/server"            // the server's name, label-safe
	LabelScope     = "mcpbox.dev/scope"             // ScopeHash of the scope
	LabelRole      = "mcpbox.dev/role"              // RoleServer, RoleOwner, RoleEgress, RoleGateway
	ManagedBy      = "mcpbox"

	RoleServer  = "server"
	RoleOwner   = "owner"
	RoleEgress  = "egress-proxy"
	RoleGateway = "gateway"

	// ServerContainer is the name of a server pod's container (the agent
	// and the server), whose log is the server's stderr.
	ServerContainer = "server"

	// AnnotationServer holds the server's name as configured (a label
	// value is limited to 63 characters of [A-Za-z0-9._-]).
	AnnotationServer = "mcpbox.dev/server-name"
)

// Where the agent's material is inside a server's pod.
const (
	TLSDir     = "/run/mcpbox/tls" // the pod's certificate, key and the CA (a Secret)
	SecretsDir = "/run/secrets"    // files the agent writes at start (memory emptyDir)
	OutputDir  = "/workspace/output"
	InputDir   = "/workspace/input"
	// RunAsUser is the uid of every server container: not root, and not
	// a uid an image's own user is likely to have (distroless's nonroot).
	RunAsUser = 65532
	// AgentPort is the port the agent listens on in the pod.
	AgentPort = 8443
	// ProxyPort is the egress proxy Service's port.
	ProxyPort = 3128
)

// OwnerName is the name of the ConfigMap that owns every object of
// gateway id.
func OwnerName(gateway string) string { return "mcpbox-gateway-" + gateway }

// LeaseName is the name of gateway id's Lease.
func LeaseName(gateway string) string { return "mcpbox-gateway-" + gateway }

// ScopeHash is a label-safe digest of a scope's key.
func ScopeHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// LabelValue makes s a valid label value (and DNS label part): lowercase
// alphanumerics and '-', at most n characters, starting and ending with
// an alphanumeric; a value that had to change gets a digest suffix so
// that two names do not collide.
func LabelValue(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == s && len(out) <= n && out != "" {
		return out
	}
	suffix := ScopeHash(s)[:6]
	if keep := n - len(suffix) - 1; len(out) > keep {
		out = strings.Trim(out[:keep], "-")
	}
	if out == "" {
		return suffix
	}
	return out + "-" + suffix
}

// Labels are the labels of an object of gateway for server (empty for a
// gateway-wide object) in role.
func Labels(gateway, server, role string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelGateway: gateway, LabelRole: role}
	if server != "" {
		l[LabelServer] = LabelValue(server, 63)
	}
	return l
}

// Selector is the label selector of gateway's objects of role ("" for
// all roles).
func Selector(gateway, role string) string {
	s := LabelManagedBy + "=" + ManagedBy + "," + LabelGateway + "=" + gateway
	if role != "" {
		s += "," + LabelRole + "=" + role
	}
	return s
}

// Owner is the owner object of every object of gateway id: deleting it
// lets the garbage collector delete them all.
func Owner(gateway string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: OwnerName(gateway), Labels: Labels(gateway, "", RoleOwner)},
		Data:       map[string]string{"note": "Owner of the objects of one mcpbox gateway. Deleting it deletes them."},
	}
}

// OwnerRef is the owner reference to a created owner object.
func OwnerRef(owner *corev1.ConfigMap) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
}

// Limits are a server pod's resource limits; zero: none of that kind.
type Limits struct {
	CPU              float64 // cores
	Memory           int64   // bytes
	EphemeralStorage int64   // bytes: the container's writable layer, logs and disk emptyDirs
}

// PodOptions describe a server's pod. Zero values are documented per
// field; what is hardened is not optional.
type PodOptions struct {
	// Name and the ids of its labels.
	Name, Gateway, Server, Scope string
	// Owner is the gateway's owner reference (OwnerRef).
	Owner metav1.OwnerReference
	// Image is the container's image.
	Image string
	// Command is the container's whole command (AgentCommand).
	Command []string
	// Env is the container's environment (no secrets: those come over
	// the agent's channel at start).
	Env map[string]string
	// TLSSecret is the Secret holding the pod's certificate (PodTLS).
	TLSSecret string
	Limits    Limits
	// TmpSize caps /tmp (an emptyDir); zero: 64Mi.
	TmpSize int64
	// OutputClaim, if set, is the PersistentVolumeClaim mounted at
	// /workspace/output; else Output, if set, makes it an emptyDir of at
	// most OutputSize bytes (gone with the pod).
	OutputClaim string
	Output      bool
	OutputSize  int64
	// InputClaim, if set, is a PersistentVolumeClaim mounted read-only
	// at /workspace/input.
	InputClaim string
	// Scheduling.
	RuntimeClass     string
	ImagePullSecrets []string
	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	// Install, if set, installs a package into PackageDir (an emptyDir
	// the server's container mounts read-only) in an init container
	// before the server runs.
	Install *Install
	// Agent, if set, copies the agent into the pod from another image
	// (AgentCopy) in the first init container: Command, and Install's,
	// then run it as AgentBin. Nil: the image has the agent.
	Agent *AgentCopy
	// TrustCA, if set, is the egress proxy's interception CA certificate
	// (PEM, public): an init container on Image, with the agent at
	// Command[0], writes the image's system bundle followed by it into
	// TrustDir, which the server's container sees read-only there and
	// over SystemBundles (addTrust).
	TrustCA []byte
}

// AgentCommand is the command of a server's container: the mcpbox agent
// at agentPath, listening on the pod's IP (the kubelet expands
// $(MCPBOX_POD_IP) from the downward API), running server.
func AgentCommand(agentPath string, server []string) []string {
	return append([]string{agentPath, "agent",
		"--listen", "$(MCPBOX_POD_IP):" + strconv.Itoa(AgentPort),
		"--cert", TLSDir + "/tls.crt", "--key", TLSDir + "/tls.key", "--ca", TLSDir + "/ca.crt",
		"--secrets-dir", SecretsDir, "--"}, server...)
}

// Pod builds a server's pod, hardened: not root, a read-only root
// filesystem, no capabilities, no privilege escalation, the runtime's
// default seccomp profile, no service-account token, no host namespaces,
// resource limits, /tmp and the secrets dir size-limited emptyDirs (the
// latter in memory), and the owner reference.
func Pod(o PodOptions) *corev1.Pod {
	f, t, uid := false, true, int64(RunAsUser)
	tmp := o.TmpSize
	if tmp == 0 {
		tmp = 64 << 20
	}
	labels := Labels(o.Gateway, o.Server, RoleServer)
	labels[LabelScope] = o.Scope
	env := []corev1.EnvVar{
		{Name: "MCPBOX_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "HOME", Value: "/tmp/home"},
	}
	for _, k := range sortedKeys(o.Env) {
		env = append(env, corev1.EnvVar{Name: k, Value: o.Env[k]})
	}
	mode := int32(0o440)
	vols := []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: qty(tmp)}}},
		{Name: "secrets", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: qty(4 << 20)}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: o.TLSSecret, DefaultMode: &mode}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "secrets", MountPath: SecretsDir},
		{Name: "tls", MountPath: TLSDir, ReadOnly: true},
	}
	switch {
	case o.OutputClaim != "":
		vols = append(vols, corev1.Volume{Name: "output", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: o.OutputClaim}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "output", MountPath: OutputDir})
	case o.Output:
		ed := &corev1.EmptyDirVolumeSource{}
		if o.OutputSize > 0 {
			ed.SizeLimit = qty(o.OutputSize)
		}
		vols = append(vols, corev1.Volume{Name: "output", VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
		mounts = append(mounts, corev1.VolumeMount{Name: "output", MountPath: OutputDir})
	}
	if o.InputClaim != "" {
		vols = append(vols, corev1.Volume{Name: "input", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: o.InputClaim, ReadOnly: true}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "input", MountPath: InputDir, ReadOnly: true})
	}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels,
			Annotations:     map[string]string{AnnotationServer: o.Server},
			OwnerReferences: []metav1.OwnerReference{o.Owner}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			TerminationGracePeriodSeconds: ptr(int64(5)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: ServerContainer, Image: o.Image, Command: o.Command, Env: env,
				WorkingDir: "/tmp",
				Ports:      []corev1.ContainerPort{{Name: "agent", ContainerPort: AgentPort, Protocol: corev1.ProtocolTCP}},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &uid,
					ReadOnlyRootFilesystem:   &t,
					AllowPrivilegeEscalation: &f,
					Privileged:               &f,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Resources:    resources(o.Limits),
				VolumeMounts: mounts,
				// Not FallbackToLogsOnError: the server's log tail would
				// go into the pod's status, in etcd.
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes:      vols,
			NodeSelector: o.NodeSelector,
			Tolerations:  o.Tolerations,
		},
	}
	if o.RuntimeClass != "" {
		p.Spec.RuntimeClassName = &o.RuntimeClass
	}
	for _, s := range o.ImagePullSecrets {
		p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if len(o.TrustCA) > 0 {
		addTrust(p, o)
	}
	if o.Install != nil {
		addInstall(p, o)
	}
	if o.Agent != nil {
		addAgent(p, o.Agent)
	}
	return p
}

// resources are the limits as both requests and limits (the Guaranteed
// class for what is set, so a server is not evicted first).
func resources(l Limits) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	if l.CPU > 0 {
		rl[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(l.CPU*1000+0.5), resource.DecimalSI)
	}
	if l.Memory > 0 {
		rl[corev1.ResourceMemory] = *resource.NewQuantity(l.Memory, resource.BinarySI)
	}
	if l.EphemeralStorage > 0 {
		rl[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(l.EphemeralStorage, resource.BinarySI)
	}
	if len(rl) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}
}

// PodTLS is the Secret of a pod's TLS material: its own certificate and
// key and the CA that signed the gateway's; never a server's secrets.
func PodTLS(name, gateway, server string, owner metav1.OwnerReference, certPEM, keyPEM, caPEM []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(gateway, server, RoleServer),
			OwnerReferences: []metav1.OwnerReference{owner}},
		Type:      corev1.SecretTypeTLS,
		Immutable: ptr(true),
		Data:      map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": caPEM},
	}
}

// PolicyOptions describe a server's NetworkPolicy.
type PolicyOptions struct {
	Gateway, Server string
	Owner           metav1.OwnerReference
	// GatewayFrom are the peers the gateway connects from; nil: pods of
	// the namespace labelled mcpbox.dev/role=gateway.
	GatewayFrom []networkingv1.NetworkPolicyPeer
	// Proxy: egress to the gateway's egress proxy pods is allowed (the
	// server has an allowlist); else no egress at all.
	Proxy bool
}

// NetworkPolicy builds a server's policy: it selects the server's pods
// of this gateway; ingress only from the gateway to the agent's port;
// egress nowhere, or only to the egress proxy's port. DNS is not allowed:
// the pods reach the proxy by its Service's IP, and the proxy resolves.
func NetworkPolicy(o PolicyOptions) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	agent, proxy := intstr.FromInt32(AgentPort), intstr.FromInt32(ProxyPort)
	from := o.GatewayFrom
	if from == nil {
		from = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{LabelRole: RoleGateway}}}}
	}
	sel := Labels(o.Gateway, o.Server, RoleServer)
	np := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "mcpbox-" + o.Gateway + "-" + LabelValue(o.Server, 40),
			Labels: Labels(o.Gateway, o.Server, RoleServer), OwnerReferences: []metav1.OwnerReference{o.Owner}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  from,
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &agent}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{},
		},
	}
	if o.Proxy {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{LabelGateway: o.Gateway, LabelRole: RoleEgress}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &proxy}},
		})
	}
	return np
}

// CIDRPeers are NetworkPolicy peers of the CIDRs; nil for none.
func CIDRPeers(cidrs []string) []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for _, c := range cidrs {
		out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	return out
}

func qty(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }

func ptr[T any](v T) *T { return &v }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
