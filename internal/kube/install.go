package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Where a package server's pod has its package.
const (
	// PackageDir is the emptyDir the install container installs the
	// package into; the server's container mounts it read-only.
	PackageDir = "/opt/mcpbox/pkg"
	// LockDir is where the install container sees the pinned
	// package.json and package-lock.json (the package's ConfigMap).
	LockDir = "/run/mcpbox/lock"
	// InstallContainer is the name of the init container that installs
	// the package.
	InstallContainer = "install"
	// InstallSecretsDir is the install container's own memory emptyDir
	// for files the gateway sends it (a registry's npmrc); the server's
	// container does not mount it.
	InstallSecretsDir = "/run/mcpbox/install-secrets"
)

// Install describes the init container of a package server's pod: the
// mcpbox agent, run once, waits for the gateway's start (the egress
// proxy's token for the registry comes over its mutual-TLS channel, never
// through the API), then installs exactly the pinned tree with `npm ci
// --ignore-scripts` (npm checks every archive against the lockfile's
// integrity) into PackageDir, and exits with npm's status.
type Install struct {
	// Image is the base image: npm, node and the agent.
	Image string
	// ConfigMap holds package.json and package-lock.json
	// (PackageConfigMap).
	ConfigMap string
	// AgentPath is the agent in Image (AgentBin when PodOptions.Agent
	// copies it in).
	AgentPath string
	// Size caps PackageDir; zero: 512Mi.
	Size int64
}

// InstallScript is the install container's command under its agent: copy
// the pinned package.json and lockfile, `npm ci` exactly that tree with
// no install scripts (its output on stderr: the agent's stdout is not an
// MCP stream here), and drop npm's cache. One quick retry: a registry that
// serves other bytes would otherwise be asked again for a minute.
func InstallScript() []string {
	return []string{"sh", "-c", `set -e; cp ` + LockDir + `/package.json ` + LockDir + `/package-lock.json ` + PackageDir + `/
cd ` + PackageDir + `
npm ci --ignore-scripts --no-audit --no-fund --omit=dev --no-update-notifier --fetch-retries=1 --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=2000 --cache ` + PackageDir + `/.npm-cache 1>&2
rm -rf ` + PackageDir + `/.npm-cache`}
}

// InstallCommand is the install container's command: the agent at
// agentPath in run-once mode around InstallScript.
func InstallCommand(agentPath string) []string {
	cmd := AgentCommand(agentPath, InstallScript())
	i := slices.Index(cmd, SecretsDir)
	cmd[i] = InstallSecretsDir // the server's container never mounts it
	return slices.Insert(cmd, 2, "--once")
}

// PackageConfigMap is the ConfigMap of a package server's pinned
// package.json and package-lock.json, owned like the gateway's other
// objects and immutable.
func PackageConfigMap(name, gateway, server string, owner metav1.OwnerReference, packageJSON, lockJSON []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(gateway, server, RoleServer),
			Annotations: map[string]string{AnnotationServer: server}, OwnerReferences: []metav1.OwnerReference{owner}},
		Immutable: ptr(true),
		Data:      map[string]string{"package.json": string(packageJSON), "package-lock.json": string(lockJSON)},
	}
}

// addInstall adds o.Install's init container and volumes to p, and
// mounts the package read-only into the server's container.
func addInstall(p *corev1.Pod, o PodOptions) {
	in := o.Install
	size := in.Size
	if size == 0 {
		size = 512 << 20
	}
	mode := int32(0o444)
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: "pkg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: qty(size)}}},
		corev1.Volume{Name: "pkg-lock", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: in.ConfigMap}, DefaultMode: &mode}}},
		corev1.Volume{Name: "install-secrets", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: qty(1 << 20)}}},
	)
	srv := &p.Spec.Containers[0]
	srv.VolumeMounts = append(srv.VolumeMounts, corev1.VolumeMount{Name: "pkg", MountPath: PackageDir, ReadOnly: true})
	ic := corev1.Container{
		Name: InstallContainer, Image: in.Image, Command: InstallCommand(in.AgentPath),
		WorkingDir:      "/tmp",
		Env:             []corev1.EnvVar{srv.Env[0], {Name: "HOME", Value: "/tmp/home"}},
		Ports:           srv.Ports,
		SecurityContext: srv.SecurityContext.DeepCopy(),
		Resources:       *srv.Resources.DeepCopy(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "tmp", MountPath: "/tmp"},
			{Name: "tls", MountPath: TLSDir, ReadOnly: true},
			{Name: "install-secrets", MountPath: InstallSecretsDir},
			{Name: "pkg-lock", MountPath: LockDir, ReadOnly: true},
			{Name: "pkg", MountPath: PackageDir},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
}
