package kubetest

import (
	"os"
	"os/exec"
	"strconv"
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
	// A System V segment of a size no one else uses: it would outlive the
	// container in the host's IPC namespace.
	shmSize := 40000 + int(time.Now().UnixNano()%10000)
	t.Cleanup(func() { removeSegments(shmSize) })
	script := `echo x > ` + probe + ` && echo shm-written
ipcmk -M ` + strconv.Itoa(shmSize) + ` >/dev/null && echo sysv-made
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
	if !strings.Contains(logs, "sysv-made") {
		t.Errorf("the probe could not make its System V segment:\n%s", logs)
	} else if ids := segments(shmSize); len(ids) > 0 {
		t.Errorf("a container's System V segment (%d bytes) outlived it in the host's IPC namespace: %v", shmSize, ids)
	}
	for _, w := range []string{"sysctl-writable", "sysrq-writable", "sys-writable"} {
		if strings.Contains(logs, w) {
			t.Errorf("a container finds the host's %s:\n%s", w, logs)
		}
	}
}

// segments are the ids of the host's System V shared memory segments of
// size bytes.
func segments(size int) []string {
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		return nil
	}
	var ids []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == strconv.Itoa(size) {
			ids = append(ids, f[1])
		}
	}
	return ids
}

func removeSegments(size int) {
	for _, id := range segments(size) {
		_ = exec.Command("ipcrm", "-m", id).Run()
	}
}
