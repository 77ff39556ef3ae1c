package kube

import (
	corev1 "k8s.io/api/core/v1"
)

// Where a pod has its agent when it comes from another image
// (backend.agent_image) rather than from the server's.
const (
	// AgentDir is the emptyDir the agent's init container copies the
	// agent into; every other container of the pod mounts it read-only.
	AgentDir = "/run/mcpbox/agent"
	// AgentBin is the copied agent: the first word of the pod's
	// commands when the agent is copied.
	AgentBin = AgentDir + "/mcpbox"
	// AgentContainer is the name of the init container that copies the
	// agent.
	AgentContainer = "agent"
	// AgentVolumeSize caps AgentDir: the static mcpbox binary (about
	// 50MB) with room to grow.
	AgentVolumeSize = 128 << 20
)

// AgentCopy describes the first init container of a pod whose image
// lacks the agent: it runs the agent of Image, which copies itself to
// AgentBin (`mcpbox agent --copy-to`) and exits, so Image needs nothing
// but mcpbox.
type AgentCopy struct {
	// Image holds the agent at Path.
	Image string
	Path  string
}

// AgentCopyCommand is the agent init container's command: the agent at
// agentPath in its image copies itself to AgentBin.
func AgentCopyCommand(agentPath string) []string {
	return []string{agentPath, "agent", "--copy-to", AgentBin}
}

// addAgent puts the agent into p: a disk emptyDir of AgentVolumeSize
// (memory would count against the server's memory limit), an init
// container before all others that copies the agent into it, hardened
// as the server's container is and with small limits of its own, and a
// read-only mount of it (not noexec: a Kubernetes volume never is) in
// every other container.
func addAgent(p *corev1.Pod, a *AgentCopy) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "agent", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: qty(AgentVolumeSize)}}})
	ro := corev1.VolumeMount{Name: "agent", MountPath: AgentDir, ReadOnly: true}
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].VolumeMounts = append(p.Spec.InitContainers[i].VolumeMounts, ro)
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].VolumeMounts = append(p.Spec.Containers[i].VolumeMounts, ro)
	}
	ac := corev1.Container{
		Name: AgentContainer, Image: a.Image, Command: AgentCopyCommand(a.Path),
		SecurityContext: p.Spec.Containers[0].SecurityContext.DeepCopy(),
		// Its log and nothing else on the node's disk: the copy is in the
		// emptyDir, which the pod's limit counts.
		Resources:                resources(Limits{CPU: 0.5, Memory: 128 << 20, EphemeralStorage: 16 << 20}),
		VolumeMounts:             []corev1.VolumeMount{{Name: "agent", MountPath: AgentDir}},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	p.Spec.InitContainers = append([]corev1.Container{ac}, p.Spec.InitContainers...)
}

// AgentCheck is the doctor's line on where the pods get the agent: copied
// from agentImage, or their own images' at agentPath (empty:
// defaultPath), which no stock image has. The doctor cannot look into
// images, so the line passes and says what the images must hold.
func AgentCheck(agentImage, agentPath, defaultPath string) Check {
	if agentPath == "" {
		agentPath = defaultPath
	}
	if agentImage != "" {
		return Check{"agent", true, "copied into every pod from backend.agent_image " + agentImage + " (mcpbox at " + agentPath + " in it)"}
	}
	return Check{"agent", true, "not copied (no backend.agent_image): every server image, backend.image and the npm base image must contain mcpbox at " +
		agentPath + ", which no stock image does; set backend.agent_image to copy it into the pods"}
}
