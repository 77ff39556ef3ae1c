package launch

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/kube"
)

// A pod that ended before it served says how; when its command was not
// found (126, 127) the error points at backend.agent_path and the image.
func TestPodReadyEnded(t *testing.T) {
	pod := func(code int32) *corev1.Pod {
		return &corev1.Pod{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: "example/srv:1", Command: []string{"/opt/mcpbox", "agent"}}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}},
		}
	}
	for _, tt := range []struct {
		code int32
		hint bool
	}{{127, true}, {126, true}, {3, false}} {
		ready, err := podReady(pod(tt.code))
		if ready || err == nil {
			t.Fatalf("exit %d: ready %v, err %v", tt.code, ready, err)
		}
		hinted := strings.Contains(err.Error(), "backend.agent_path (/opt/mcpbox) in the image example/srv:1")
		if hinted != tt.hint || !strings.Contains(err.Error(), "exited with status") {
			t.Fatalf("exit %d: %v (hint %v, want %v)", tt.code, err, hinted, tt.hint)
		}
	}
}

// An agent that was to be copied into the pod: a copy that was not found
// in the agent image points at agent_path and agent_image; a copied
// agent the server's container did not find says nothing of the image.
func TestPodReadyAgentCopy(t *testing.T) {
	p := &corev1.Pod{
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: kube.AgentContainer, Image: "example/agent:1", Command: kube.AgentCopyCommand("/ko-app/mcpbox")}},
			Containers:     []corev1.Container{{Name: kube.ServerContainer, Image: "example/srv:1", Command: kube.AgentCommand(kube.AgentBin, []string{"srv"})}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: kube.AgentContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127}}}}},
	}
	_, err := podReady(p)
	if err == nil || !strings.Contains(err.Error(), "init container agent exited with status 127") ||
		!strings.Contains(err.Error(), "is mcpbox at backend.agent_path (/ko-app/mcpbox) in backend.agent_image example/agent:1?") {
		t.Fatalf("copy not found: %v", err)
	}
	p.Status.InitContainerStatuses[0].State.Terminated.ExitCode = 0
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kube.ServerContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127}}}}
	_, err = podReady(p)
	if err == nil || strings.Contains(err.Error(), "agent_path") || !strings.Contains(err.Error(), "exited with status 127") {
		t.Fatalf("copied agent not found: %v", err)
	}
}
