package specconv

import (
	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/config"
	"mcpbox/internal/kube"
)

// KubePod is the pod template of server s on the kubernetes backend (the
// backend fills in the per-start fields): its image, the agent's command
// around the server's, its environment (no secrets), limits, volumes and
// scheduling. On kubernetes an image server's args are its whole command:
// the agent cannot read the image's entrypoint.
func KubePod(c *config.Config, s *config.Server) kube.PodOptions {
	b := c.BackendOf(s)
	img, cmd := b.Image, s.Command
	if s.Image.Ref != "" {
		img, cmd = s.Image.Ref, s.Args
	}
	agent := b.AgentPath
	if agent == "" {
		agent = config.DefaultAgentPath
	}
	lim := Limits(s)
	po := kube.PodOptions{
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
