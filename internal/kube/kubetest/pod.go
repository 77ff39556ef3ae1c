package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podRun is one pod on the test node, from its start to the end of its
// processes. Its goroutine (run) owns the containers' lifecycle; events
// reach it through channels.
type podRun struct {
	n        *Node
	ns, name string
	uid      types.UID
	dir      string      // vol/NAME, ctr/CONTAINER
	pod      *corev1.Pod // the version it was started from: containers and volumes cannot change
	ip       string
	started  metav1.Time

	stopc chan struct{} // closed by the first requestStop
	exits chan *ctr     // a container's process ended

	mu       sync.Mutex
	stopping bool                // guarded by mu
	grace    time.Duration       // guarded by mu: shortened by later requests
	final    bool                // guarded by mu: remove the object once stopped
	ctrs     []*ctr              // guarded by mu: init containers, then the others
	phase    corev1.PodPhase     // guarded by mu
	reason   string              // guarded by mu: why it is Pending or Failed
	message  string              // guarded by mu
	inits    bool                // guarded by mu: init containers done
	vols     map[string]volume   // guarded by mu: written by prepare
	backoffs map[string]*backoff // owned by run
}

// ctr is one container of a podRun. Its fields are guarded by the run's mu.
type ctr struct {
	spec     corev1.Container
	init     bool
	proc     *containerProc // nil when not running
	restarts int32
	state    corev1.ContainerState
	last     corev1.ContainerState
}

type backoff struct {
	delay time.Duration
	timer *time.Timer
}

func newPodRun(n *Node, p *corev1.Pod) *podRun {
	r := &podRun{
		n: n, ns: p.Namespace, name: p.Name, uid: p.UID,
		dir:      filepath.Join(n.dir, "pods", string(p.UID)),
		pod:      p.DeepCopy(),
		stopc:    make(chan struct{}),
		phase:    corev1.PodPending,
		backoffs: map[string]*backoff{},
	}
	for _, c := range p.Spec.InitContainers {
		r.ctrs = append(r.ctrs, &ctr{spec: c, init: true, state: waiting("PodInitializing")})
	}
	for _, c := range p.Spec.Containers {
		r.ctrs = append(r.ctrs, &ctr{spec: c, state: waiting("ContainerCreating")})
	}
	// Each container has at most one exit not yet read once loop has
	// returned: the senders never block.
	r.exits = make(chan *ctr, len(r.ctrs)+1)
	return r
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

// requestStop asks the run to stop its containers within grace. final
// says the pod object still exists and is to be removed afterwards.
func (r *podRun) requestStop(grace time.Duration, final bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopping {
		r.stopping, r.grace = true, grace
		close(r.stopc)
	} else if grace < r.grace {
		r.grace = grace
	}
	r.final = r.final || final
}

func (r *podRun) run() {
	defer r.n.wg.Done()
	defer r.n.forget(r.uid)
	defer os.RemoveAll(r.dir)
	r.ip = r.n.allocIP()
	r.started = metav1.Now()
	if err := r.setup(); err != nil {
		r.fail("CreatePodSandboxError", err.Error())
	} else if r.prepare() {
		r.loop()
	}
	<-r.stopc
	r.killAll()
	r.mu.Lock()
	final := r.final
	r.mu.Unlock()
	if final {
		r.n.finalize(r.pod)
	}
}

func (r *podRun) setup() error {
	for _, d := range []string{"vol", "ctr"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			return err
		}
	}
	// A new pod of the same name starts a new log.
	logs := filepath.Dir(r.n.logPath(r.ns, r.name, "x"))
	if err := os.RemoveAll(logs); err != nil {
		return err
	}
	return os.MkdirAll(logs, 0o755)
}

// prepare writes the volumes, retrying while what they come from (a
// Secret, a ConfigMap, a claim) is missing, as the kubelet waits in
// ContainerCreating. It reports false when the pod failed or is stopped.
func (r *podRun) prepare() bool {
	for {
		err := r.writeVolumes()
		if err == nil {
			return true
		}
		var fatal *unsupportedError
		if errors.As(err, &fatal) {
			r.fail("UnsupportedByTestNode", err.Error())
			return false
		}
		r.mu.Lock()
		r.reason, r.message = "ContainerCreating", err.Error()
		r.mu.Unlock()
		r.push()
		select {
		case <-r.stopc:
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// fail marks the pod Failed with reason and message.
func (r *podRun) fail(reason, msg string) {
	r.mu.Lock()
	r.phase, r.reason, r.message = corev1.PodFailed, reason, msg
	r.mu.Unlock()
	r.push()
}

// loop runs the init containers one after the other, then the others,
// restarting them as the restart policy says, until the pod ends or is
// stopped.
func (r *podRun) loop() {
	r.mu.Lock()
	r.reason, r.message = "", ""
	r.mu.Unlock()
	restarts := make(chan *ctr, len(r.ctrs)+1) // at most one pending per container
	next := r.nextInit()
	if next == nil {
		r.startApps()
	} else {
		r.start(next)
	}
	r.push()
	for {
		select {
		case <-r.stopc:
			return
		case c := <-restarts:
			r.start(c)
			r.push()
		case c := <-r.exits:
			r.mu.Lock()
			code := c.state.Terminated.ExitCode
			policy := r.pod.Spec.RestartPolicy
			again := policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0)
			if c.init {
				again = code != 0 && policy != corev1.RestartPolicyNever
			}
			r.mu.Unlock()
			switch {
			case again:
				r.restartLater(c, restarts)
			case c.init && code != 0:
				r.mu.Lock()
				r.phase = corev1.PodFailed
				r.mu.Unlock()
			case c.init:
				if n := r.nextInit(); n != nil {
					r.start(n)
				} else {
					r.startApps()
				}
			default:
				r.settle()
			}
			r.push()
		}
	}
}

// nextInit returns the first init container that has not succeeded.
func (r *podRun) nextInit() *ctr {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.ctrs {
		if c.init && (c.state.Terminated == nil || c.state.Terminated.ExitCode != 0) {
			return c
		}
	}
	r.inits = true
	return nil
}

func (r *podRun) startApps() {
	r.mu.Lock()
	var apps []*ctr
	for _, c := range r.ctrs {
		if !c.init {
			apps = append(apps, c)
		}
	}
	r.mu.Unlock()
	for _, c := range apps {
		r.start(c)
	}
}

// start runs a container's process; a container that cannot start ends
// as terminated with exit code 128 and its reason, as a runtime's
// StartError.
func (r *podRun) start(c *ctr) {
	proc, err := r.startContainer(c.spec)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		now := metav1.Now()
		c.last, c.state = c.state, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now,
		}}
		go func() { r.exits <- c }()
		return
	}
	if c.state.Terminated != nil {
		c.last = c.state
	}
	c.proc = proc
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	if !c.init {
		r.phase = corev1.PodRunning
	}
	go func() {
		<-proc.done
		r.mu.Lock()
		c.proc = nil
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(proc.exitCode), Reason: exitReason(proc.exitCode),
			StartedAt: c.state.Running.StartedAt, FinishedAt: metav1.Now(),
			ContainerID: containerID(r.uid, c.spec.Name),
		}}
		r.mu.Unlock()
		r.exits <- c
	}()
}

func exitReason(code int) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

// restartLater restarts c after a back-off that doubles from 1s to 10s
// (the kubelet's goes to 5 minutes, too long for tests).
func (r *podRun) restartLater(c *ctr, restarts chan<- *ctr) {
	b := r.backoffs[c.spec.Name]
	if b == nil {
		b = &backoff{delay: time.Second}
		r.backoffs[c.spec.Name] = b
	} else if b.delay < 10*time.Second {
		b.delay *= 2
	}
	r.mu.Lock()
	c.restarts++
	c.last, c.state = c.state, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "CrashLoopBackOff", Message: fmt.Sprintf("back-off %v restarting container %s", b.delay, c.spec.Name),
	}}
	r.mu.Unlock()
	b.timer = time.AfterFunc(b.delay, func() { restarts <- c })
}

// settle sets the phase once no app container runs or waits.
func (r *podRun) settle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	failed := false
	for _, c := range r.ctrs {
		if c.init {
			continue
		}
		if c.state.Terminated == nil {
			return
		}
		failed = failed || c.state.Terminated.ExitCode != 0
	}
	r.phase = corev1.PodSucceeded
	if failed {
		r.phase = corev1.PodFailed
	}
}

// killAll stops every running container: SIGTERM, then SIGKILL once the
// grace period (bounded by the node's MaxGrace, shortened by a later
// request) has passed; it returns when all have ended. SIGTERM is sent
// again every second: a pid 1 discards a signal it has no handler for,
// and a process deleted right after its start may not have one yet.
func (r *podRun) killAll() {
	for _, b := range r.backoffs {
		if b.timer != nil {
			b.timer.Stop()
		}
	}
	r.mu.Lock()
	var procs []*containerProc
	for _, c := range r.ctrs {
		if c.proc != nil {
			procs = append(procs, c.proc)
		}
	}
	r.mu.Unlock()
	begin := time.Now()
	for _, p := range procs {
		p.terminate()
	}
	lastTerm := begin
	for _, p := range procs {
	wait:
		for {
			r.mu.Lock()
			grace := min(r.grace, r.n.maxGrace)
			r.mu.Unlock()
			left := grace - time.Since(begin)
			if left <= 0 {
				p.kill()
				<-p.done
				break
			}
			if time.Since(lastTerm) >= time.Second {
				for _, q := range procs {
					q.terminate()
				}
				lastTerm = time.Now()
			}
			select {
			case <-p.done:
				break wait
			case <-time.After(min(left, 50*time.Millisecond)):
			}
		}
	}
}

// push reports the pod's status to the API server.
func (r *podRun) push() {
	st := r.status()
	err := r.n.c.Admin.Do(context.Background(), http.MethodPatch,
		"/api/v1/namespaces/"+r.ns+"/pods/"+r.name+"/status", map[string]any{"status": st}, nil)
	if err != nil && !IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "kubetest: reporting the status of %s/%s: %v\n", r.ns, r.name, err)
	}
}

func (r *podRun) status() corev1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := corev1.PodStatus{
		Phase: r.phase, Reason: r.reason, Message: r.message,
		HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP: r.ip, PodIPs: []corev1.PodIP{{IP: r.ip}},
		StartTime: &r.started,
		QOSClass:  qosClass(r.pod),
	}
	allReady := true
	for _, c := range r.ctrs {
		running := c.state.Running != nil
		ready := running && !c.init
		cs := corev1.ContainerStatus{
			Name: c.spec.Name, Image: c.spec.Image, ImageID: "kubetest://" + c.spec.Image,
			ContainerID: containerID(r.uid, c.spec.Name), RestartCount: c.restarts,
			State: c.state, LastTerminationState: c.last, Ready: ready, Started: &running,
		}
		if c.init {
			cs.Ready = c.state.Terminated != nil && c.state.Terminated.ExitCode == 0
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			continue
		}
		allReady = allReady && ready
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.Now()}
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodScheduled, true),
		cond(corev1.PodInitialized, r.inits),
		cond(corev1.ContainersReady, allReady && r.phase == corev1.PodRunning),
		cond(corev1.PodReady, allReady && r.phase == corev1.PodRunning),
	}
	return st
}

func containerID(uid types.UID, name string) string {
	return "kubetest://" + string(uid) + "/" + name
}

func qosClass(p *corev1.Pod) corev1.PodQOSClass {
	if p.Status.QOSClass != "" {
		return p.Status.QOSClass // the API server computes it at creation
	}
	return corev1.PodQOSBestEffort
}

// kill sends SIGKILL to a running container's main process, by pidfd (see
// signalMain); false if it has none.
func (r *podRun) kill(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.ctrs {
		if c.spec.Name == name && c.proc != nil {
			return c.proc.signalMain(syscall.SIGKILL)
		}
	}
	return false
}

// pid is the host PID of a running container's main process, or 0.
func (r *podRun) pid(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.ctrs {
		if c.spec.Name == name && c.proc != nil {
			return c.proc.mainPID()
		}
	}
	return 0
}
