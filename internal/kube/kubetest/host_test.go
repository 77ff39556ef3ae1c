package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestImageWithout: an image the node makes lack some paths runs
// without them, another image still has them, and the host keeps its
// files, also one the removal reaches through an absolute symlink of
// the root (it resolves inside the container's root).
func TestImageWithout(t *testing.T) {
	c := Shared(t)
	ns := "image-without"
	c.CreateNamespace(t, ns)
	dir, err := os.MkdirTemp("/var/tmp", "kubetest-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	victim := filepath.Join(dir, "target", "victim")
	for _, p := range []string{filepath.Join(dir, "gone"), filepath.Join(dir, "kept"), victim} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	img := "kubetest.test/without-" + randomText(t)
	c.Node.ImageWithout(img, filepath.Join(dir, "gone"), filepath.Join(dir, "link", "victim"))
	t.Cleanup(func() { c.Node.ImageWithout(img) })
	script := `cd ` + dir + `; for f in gone kept link/victim; do [ -e $f ] && echo "has $f"; done; echo done`
	run := func(name, image string) string {
		create(t, c, "/api/v1/namespaces/"+ns+"/pods", &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: new(false),
				RestartPolicy:                corev1.RestartPolicyNever,
				Containers:                   []corev1.Container{{Name: "c", Image: image, Command: []string{"/bin/sh", "-c", script}}},
			},
		})
		c.WaitPod(t, ns, name, 30*time.Second, func(p *corev1.Pod) bool {
			return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
		})
		logs, err := c.Node.Logs(ns, name, "c")
		if err != nil {
			t.Fatal(err)
		}
		return logs
	}
	if got := run("without", img); got != "has kept\ndone\n" {
		t.Errorf("a container of the image without gone and link/victim sees:\n%s", got)
	}
	if got := run("other", "kubetest.test/other"); got != "has gone\nhas kept\nhas link/victim\ndone\n" {
		t.Errorf("a container of another image sees:\n%s", got)
	}
	for _, p := range []string{filepath.Join(dir, "gone"), victim} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the host lost %s: %v", p, err)
		}
	}
}
