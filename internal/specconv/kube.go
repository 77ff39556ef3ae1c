package specconv

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/config"
	"mcpbox/internal/kube"
)

// KubePod is the pod template of server s on the kubernetes backend (the
// backend fills in the per-start fields): its image, the agent's command
// around the server's, its environment (no secrets), limits, volumes and
// scheduling. On kubernetes an image server's args are its whole command:
// the agent cannot read the image's entrypoint. With backend.agent_image
// an init container copies the agent into the pod (kube.AgentCopy), so
// the server's image need not hold it.
func KubePod(c *config.Config, s *config.Server) kube.PodOptions {
	b := c.BackendOf(s)
	img, cmd := b.Image, s.Command
	if s.Image.Ref != "" {
		img, cmd = s.Image.Ref, s.Args
	}
	agent, copied := KubeAgent(b)
	lim := Limits(s)
	po := kube.PodOptions{
		Agent:            copied,
		Image:            img,
		Command:          kube.AgentCommand(agent, cmd),
		Env:              map[string]string{},
		TmpSize:          int64(s.Filesystem.Tmp.Size),
		RuntimeClass:     b.RuntimeClass,
		InputClaim:       b.InputClaim,
		ImagePullSecrets: b.ImagePullSecrets,
		Limits:           kube.Limits{CPU: s.Limits.CPU, Memory: lim.Memory},
	}
	if po.TmpSize == 0 {
		po.TmpSize = 64 << 20
	}
	for _, e := range s.Env {
		po.Env[e.Name] = e.Value
	}
	if out := s.Filesystem.Output; out != nil {
		po.Output, po.OutputSize = true, int64(out.Size)
	}
	// The disk the pod may use: /tmp, an emptyDir output, and 64Mi of
	// logs and writable layer.
	po.Limits.EphemeralStorage = po.TmpSize + 64<<20
	if po.Output && b.StorageClass == "" {
		po.Limits.EphemeralStorage += po.OutputSize
	}
	if copied != nil {
		po.Limits.EphemeralStorage += kube.AgentVolumeSize
	}
	if b.NodeSelector != nil {
		po.NodeSelector = map[string]string{}
		for _, e := range b.NodeSelector {
			po.NodeSelector[e.Name] = e.Value
		}
	}
	for _, t := range b.Tolerations {
		po.Tolerations = append(po.Tolerations, corev1.Toleration{Key: t.Key,
			Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return po
}

// KubeAgent is where b's pods run the agent from, and how it gets there:
// with agent_image, kube.AgentBin, copied from agent_path in that image;
// else agent_path (or the default) in the pod's own image, and nil.
func KubeAgent(b config.Backend) (string, *kube.AgentCopy) {
	path := b.AgentPath
	if path == "" {
		path = config.DefaultAgentPath
	}
	if b.AgentImage == "" {
		return path, nil
	}
	return kube.AgentBin, &kube.AgentCopy{Image: b.AgentImage, Path: path}
}

// KubeInstallSize caps a package server pod's installed tree (its
// emptyDir).
const KubeInstallSize = 512 << 20

// KubePackagePod is KubePod for a package server installed as p (from
// Options.Packages): the pod runs on the ecosystem's base image, an init
// container installs the pinned tree (kube.Install; the backend names
// its ConfigMap per start) at kube.PackageDir, which the server's
// command (p.Args, under PackageTarget, the same path) runs from,
// read-only.
func KubePackagePod(c *config.Config, s *config.Server, p Package) (kube.PodOptions, error) {
	eco, _, _ := strings.Cut(s.Package, ":")
	b := c.BackendOf(s)
	img := b.BaseImage(eco)
	if eco != "npm" || img == "" {
		return kube.PodOptions{}, fmt.Errorf("server %s: %s packages are not installed into pods", s.Name, eco)
	}
	if len(p.Args) == 0 {
		return kube.PodOptions{}, fmt.Errorf("server %s: package %s is not installed", s.Name, s.Package)
	}
	agent, _ := KubeAgent(b)
	po := KubePod(c, s)
	po.Image = img
	po.Command = kube.AgentCommand(agent, p.Args)
	for _, e := range p.Env {
		if k, v, ok := strings.Cut(e, "="); ok {
			po.Env[k] = v
		}
	}
	po.Install = &kube.Install{Image: img, AgentPath: agent, Size: KubeInstallSize}
	po.Limits.EphemeralStorage += KubeInstallSize
	return po, nil
}
