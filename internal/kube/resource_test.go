package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// PodState tells why a pod is not running as the cluster says it: the
// scheduler's message, a container's waiting reason; a wait for a pod
// that stays Pending used to end in "context deadline exceeded" alone.
func TestPodState(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.\n"},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "server", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}},
	}}
	got := PodState(p)
	for _, want := range []string{"phase Pending", "PodScheduled: Unschedulable: 0/3 nodes are available", "container server waiting: ContainerCreating"} {
		if !strings.Contains(got, want) {
			t.Errorf("PodState = %q, want %q in it", got, want)
		}
	}
	if strings.ContainsAny(got, "\n\r") || strings.Contains(got, "Ready") {
		t.Errorf("PodState = %q: a line break, or a condition that holds", got)
	}
}
