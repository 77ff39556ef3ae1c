package launch

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
