package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Node is the test node: a kubelet and a scheduler in one, for pods only.
// It registers the Node NodeName (Ready), binds every unscheduled pod
// whose nodeSelector its labels match, and runs each container of the
// pods bound to it as a local process (see container.go), reporting phase,
// podIP and container states as a kubelet does. When a pod is deleted it
// stops the processes (SIGTERM, then SIGKILL after the grace period,
// bounded by Options.MaxGrace) and then removes the object with grace 0.
type Node struct {
	c        *Cluster
	labels   map[string]string
	maxGrace time.Duration
	dir      string // pods/UID and pvc/NS/CLAIM below it
	ipNet    byte   // the second octet of this node's pod IPs

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	kubelet *http.Server // the container log API (kubelet.go)

	mu     sync.Mutex
	pods   map[types.UID]*podRun // guarded by mu
	nextIP int                   // guarded by mu
	images map[string][]string   // guarded by mu: image → the paths it lacks (ImageWithout)
}

func startNode(c *Cluster, opts Options) (*Node, error) {
	n := &Node{
		c:        c,
		labels:   map[string]string{"kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH},
		maxGrace: opts.MaxGrace,
		dir:      filepath.Join(c.Dir, "node"),
		pods:     map[types.UID]*podRun{},
		images:   map[string][]string{},
	}
	if n.maxGrace == 0 {
		n.maxGrace = 10 * time.Second
	}
	for k, v := range opts.NodeLabels {
		n.labels[k] = v
	}
	// A random /16 of 127/8 for this node's pods, so clusters of test
	// packages that run at once rarely hand out the same pod IP. 127.96/16
	// is the service range.
	var b [1]byte
	_, _ = rand.Read(b[:])
	n.ipNet = 100 + b[0]%150
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	port, err := n.serveKubelet()
	if err != nil {
		return nil, err
	}
	if err := n.register(port); err != nil {
		n.kubelet.Close()
		return nil, err
	}
	n.wg.Add(1)
	go n.loop()
	return n, nil
}

// register creates the Node object and reports it Ready.
func (n *Node) register(kubeletPort int) error {
	ctx := context.Background()
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("32Gi"),
		corev1.ResourcePods:             resource.MustParse("1000"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: n.labels},
	}
	if err := n.c.Admin.Do(ctx, http.MethodPost, "/api/v1/nodes", node, nil); err != nil {
		return fmt.Errorf("registering the test node: %w", err)
	}
	status := corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubetest node", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: NodeName}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(kubeletPort)}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: KubeVersion, OperatingSystem: "linux", Architecture: runtime.GOARCH,
			ContainerRuntimeVersion: "kubetest://" + KubeVersion,
		},
	}
	if err := n.c.Admin.Do(ctx, http.MethodPatch, "/api/v1/nodes/"+NodeName+"/status", map[string]any{"status": status}, nil); err != nil {
		return fmt.Errorf("reporting the test node ready: %w", err)
	}
	return nil
}

// loop lists and watches all pods until the node stops.
func (n *Node) loop() {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		var list corev1.PodList
		if err := n.c.Admin.Do(n.ctx, http.MethodGet, "/api/v1/pods", nil, &list); err != nil {
			n.sleep(200 * time.Millisecond)
			continue
		}
		seen := map[types.UID]bool{}
		for i := range list.Items {
			seen[list.Items[i].UID] = true
			n.handle(&list.Items[i])
		}
		n.mu.Lock()
		for uid, r := range n.pods {
			if !seen[uid] {
				r.requestStop(0, false) // deleted while we were not watching
			}
		}
		n.mu.Unlock()
		_ = n.c.Admin.watch(n.ctx, "/api/v1/pods", list.ResourceVersion, func(ev watchEvent) error {
			if ev.Type == "BOOKMARK" {
				return nil
			}
			var p corev1.Pod
			if err := json.Unmarshal(ev.Object, &p); err != nil {
				return err
			}
			if ev.Type == "DELETED" {
				n.gone(&p)
			} else {
				n.handle(&p)
			}
			return nil
		})
	}
}

func (n *Node) sleep(d time.Duration) {
	select {
	case <-n.ctx.Done():
	case <-time.After(d):
	}
}

// handle brings the node in line with one pod's latest version.
func (n *Node) handle(p *corev1.Pod) {
	if p.Spec.NodeName == "" {
		if p.DeletionTimestamp == nil && n.schedulable(p) {
			n.bind(p)
		}
		return
	}
	if p.Spec.NodeName != NodeName {
		return
	}
	n.mu.Lock()
	r := n.pods[p.UID]
	if r == nil {
		if p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			n.mu.Unlock()
			return
		}
		if p.DeletionTimestamp != nil {
			n.mu.Unlock()
			n.finalize(p) // nothing of it runs here
			return
		}
		r = newPodRun(n, p)
		n.pods[p.UID] = r
		n.wg.Add(1)
		go r.run()
	}
	n.mu.Unlock()
	if p.DeletionTimestamp != nil {
		grace := int64(30)
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		r.requestStop(time.Duration(grace)*time.Second, true)
	}
}

// gone stops what runs of a pod whose object was removed (grace 0 by
// someone else, or its namespace went).
func (n *Node) gone(p *corev1.Pod) {
	n.mu.Lock()
	r := n.pods[p.UID]
	n.mu.Unlock()
	if r != nil {
		r.requestStop(0, false)
	}
}

// schedulable reports whether the pod is the default scheduler's and its
// nodeSelector matches the node. Affinity, taints and resources are not
// looked at.
func (n *Node) schedulable(p *corev1.Pod) bool {
	if p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return false
	}
	for k, v := range p.Spec.NodeSelector {
		if n.labels[k] != v {
			return false
		}
	}
	return true
}

func (n *Node) bind(p *corev1.Pod) {
	b := &corev1.Binding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
		Target:     corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: NodeName},
	}
	err := n.c.Admin.Do(n.ctx, http.MethodPost, "/api/v1/namespaces/"+p.Namespace+"/pods/"+p.Name+"/binding", b, nil)
	if err != nil && !IsConflict(err) && !IsNotFound(err) {
		// The next event or relist tries again.
		fmt.Fprintf(os.Stderr, "kubetest: binding %s/%s: %v\n", p.Namespace, p.Name, err)
	}
}

// finalize removes a terminating pod's object once nothing of it runs, as
// the kubelet does: a delete with grace 0 for this very pod (its UID).
func (n *Node) finalize(p *corev1.Pod) {
	zero := int64(0)
	opts := &metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}}
	err := n.c.Admin.Do(context.Background(), http.MethodDelete, "/api/v1/namespaces/"+p.Namespace+"/pods/"+p.Name, opts, nil)
	if err != nil && !IsNotFound(err) && !IsConflict(err) {
		fmt.Fprintf(os.Stderr, "kubetest: removing %s/%s: %v\n", p.Namespace, p.Name, err)
	}
}

// allocIP hands out the next pod IP, 127.N.x.y.
func (n *Node) allocIP() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	i := n.nextIP
	n.nextIP++
	return fmt.Sprintf("127.%d.%d.%d", n.ipNet, 1+i/250%250, 1+i%250)
}

// forget drops a pod run that has ended.
func (n *Node) forget(uid types.UID) {
	n.mu.Lock()
	delete(n.pods, uid)
	n.mu.Unlock()
}

// stop kills every pod's processes and waits for them.
func (n *Node) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	if n.kubelet != nil {
		n.kubelet.Close()
	}
	n.mu.Lock()
	for _, r := range n.pods {
		r.requestStop(0, false)
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// run returns the run of a pod (by namespace and name), if it has one.
func (n *Node) run(ns, name string) *podRun {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.pods {
		if r.ns == ns && r.name == name {
			return r
		}
	}
	return nil
}

// ContainerPID returns the host PID of the running container's process
// (the main process of the container's command, pid 1 of its pid
// namespace), or 0 if it does not run.
func (n *Node) ContainerPID(ns, pod, container string) int {
	r := n.run(ns, pod)
	if r == nil {
		return 0
	}
	return r.pid(container)
}

// KillContainer sends SIGKILL to the running container's process (pid 1
// of its pid namespace), as a crash would, and reports whether there was
// one. Use it rather than a kill of ContainerPID's number: the process may
// end in between and its number go to another program.
func (n *Node) KillContainer(ns, pod, container string) bool {
	r := n.run(ns, pod)
	return r != nil && r.kill(container)
}

// Logs returns what a container of a pod wrote to stdout and stderr, all
// its restarts together. The log outlives the pod (until the cluster
// stops or a new pod of the same name starts), so a test can read what a
// deleted or crashed pod said.
func (n *Node) Logs(ns, pod, container string) (string, error) {
	b, err := os.ReadFile(n.logPath(ns, pod, container))
	if os.IsNotExist(err) {
		return "", fmt.Errorf("no log of container %s of pod %s/%s on the test node", container, ns, pod)
	}
	return string(b), err
}

// logPath is where a container's output goes.
func (n *Node) logPath(ns, pod, container string) string {
	return filepath.Join(n.dir, "logs", ns, pod, container+".log")
}

// PVCDir is the host directory that stands for a PersistentVolumeClaim
// (no provisioner here: a claim is a directory that lives as long as the
// cluster and is shared by every pod that mounts the claim).
func (n *Node) PVCDir(ns, claim string) string {
	return filepath.Join(n.dir, "pvc", ns, claim)
}

// ImageWithout makes image (a reference as a container names it) lack
// paths, absolute: its containers started from now on see the host's
// root without them, as an image built without those files would be. No
// paths: the image is the host's root again. Every other image is the
// host's whole root.
func (n *Node) ImageWithout(image string, paths ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(paths) == 0 {
		delete(n.images, image)
		return
	}
	n.images[image] = append([]string(nil), paths...)
}

// imageWithout is what ImageWithout removed from image.
func (n *Node) imageWithout(image string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.images[image]
}
