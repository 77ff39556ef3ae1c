package kube

import (
	corev1 "k8s.io/api/core/v1"
)

// Where a server pod whose secrets are added at the egress proxy finds
// the interception CA (PodOptions.TrustCA): the trust init container,
// on the server's own image, writes into TrustDir (an emptyDir) the CA's
// certificate and the image's own system bundle followed by it; the
// server's container mounts TrustDir read-only and the bundle, by
// subPath, read-only over each of SystemBundles, so that TLS clients
// that ignore SSL_CERT_FILE and the like trust the proxy too, and the
// image's other roots keep working.
const (
	TrustDir        = "/run/mcpbox/trust"
	TrustBundleName = "ca-bundle.pem" // the image's bundle and the CA
	TrustCAName     = "ca.pem"        // the CA alone (NODE_EXTRA_CA_CERTS)
	// TrustContainer is the name of the init container that writes them.
	TrustContainer = "trust"
	// TrustCAEnv carries the CA's certificate (public) to the trust
	// container; never its key, which only the proxy holds.
	TrustCAEnv = "MCPBOX_PROXY_CA"
	// TrustVolumeSize caps TrustDir: a system bundle is about 200KB; the
	// agent refuses a bundle over TrustMaxBundle.
	TrustVolumeSize = 8 << 20
	TrustMaxBundle  = 3 << 20
)

// SystemBundles are where TLS stacks look for the system's bundle: Go's
// list (crypto/x509 root_linux.go), which covers Debian, Ubuntu, Alpine,
// Fedora, RHEL, openSUSE and their kin; the same as a local sandbox's.
// The image's own bundle is the first of them that is a file (links
// followed inside the image).
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// TrustCommand is the trust container's command: the agent at agentPath
// writes the trust files into TrustDir and exits.
func TrustCommand(agentPath string) []string {
	return []string{agentPath, "agent", "--trust-dir", TrustDir}
}

// addTrust adds the trust init container (first, or right after the
// agent's copy), its memory emptyDir, and the server container's
// read-only mounts of TrustDir and of the bundle over SystemBundles. The
// container runtime resolves each mount path inside the container's
// root (an image's link, such as Alpine's /etc/ssl/cert.pem, is covered
// where it leads); a path the image lacks is created in the container's
// writable layer before the root is made read-only.
func addTrust(p *corev1.Pod, o PodOptions) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "trust", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: qty(TrustVolumeSize)}}})
	srv := &p.Spec.Containers[0]
	srv.VolumeMounts = append(srv.VolumeMounts, corev1.VolumeMount{Name: "trust", MountPath: TrustDir, ReadOnly: true})
	for _, b := range SystemBundles {
		srv.VolumeMounts = append(srv.VolumeMounts, corev1.VolumeMount{Name: "trust", MountPath: b, SubPath: TrustBundleName, ReadOnly: true})
	}
	agent := ""
	if len(o.Command) > 0 {
		agent = o.Command[0]
	}
	tc := corev1.Container{
		Name: TrustContainer, Image: o.Image, Command: TrustCommand(agent),
		Env:             []corev1.EnvVar{{Name: TrustCAEnv, Value: string(o.TrustCA)}},
		WorkingDir:      "/",
		SecurityContext: srv.SecurityContext.DeepCopy(),
		// Reads one file and writes two into the emptyDir: its log and
		// nothing else on the node's disk.
		Resources:                resources(Limits{CPU: 0.25, Memory: 64 << 20, EphemeralStorage: 1 << 20}),
		VolumeMounts:             []corev1.VolumeMount{{Name: "trust", MountPath: TrustDir}},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, tc)
}
