package kubetest

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestContainerLeavesHostAlone: a container as a test writes it (root,
// every capability: the defaults) writes nothing of the host through
// what the test node shares with it: /dev/shm (the host's tmpfs, where
// files outlive the test), the kernel's settings under /proc/sys, the
// SysRq trigger, /sys. Each probe is harmless if it gets through: a new
// file in /dev/shm (removed here), writability checked with access(2).
func TestContainerLeavesHostAlone(t *testing.T) {
	c := Shared(t)
	ns := "host-alone"
	c.CreateNamespace(t, ns)
	probe := "/dev/shm/kubetest-probe-" + randomText(t)
	t.Cleanup(func() { os.Remove(probe) })
	script := `echo x > ` + probe + ` && echo shm-written
[ -w /proc/sys/kernel/printk_ratelimit ] && echo sysctl-writable
[ -w /proc/sysrq-trigger ] && echo sysrq-writable
[ -w /sys/kernel/mm/transparent_hugepage/enabled ] && echo sys-writable
echo done`
	create(t, c, "/api/v1/namespaces/"+ns+"/pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			RestartPolicy:                corev1.RestartPolicyNever,
			Containers:                   []corev1.Container{{Name: "probe", Image: "mcpbox-test", Command: []string{"/bin/sh", "-c", script}}},
		},
	})
	c.WaitPod(t, ns, "probe", 30*time.Second, func(p *corev1.Pod) bool {
		return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	logs, err := c.Node.Logs(ns, "probe", "probe")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "done") {
		t.Fatalf("the probe did not run to its end:\n%s", logs)
	}
	if _, err := os.Stat(probe); err == nil {
		t.Errorf("a container wrote the host's /dev/shm (%s)", probe)
	}
	for _, w := range []string{"sysctl-writable", "sysrq-writable", "sys-writable"} {
		if strings.Contains(logs, w) {
			t.Errorf("a container finds the host's %s:\n%s", w, logs)
		}
	}
}
