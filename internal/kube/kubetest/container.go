package kubetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/procgroup"
)

// A container runs as its command in new mount, uts, ipc and pid
// namespaces made by util-linux's unshare (System V and POSIX IPC objects
// end with it), but in the host's network namespace:
//
//	unshare --mount --uts --ipc --pid --fork --kill-child   (the host's child; PDEATHSIG)
//	└─ sh: outer script   pid 1 of the container: builds the root, then execs
//	   chroot ROOT sh: inner script   mounts the volumes at their paths, then execs
//	   setpriv (uid, gid, groups, no_new_privs, bounding set) env -C WORKDIR CMD ARGS
//
// The root is an overlay whose lower layer is the host's / (the "image"
// is the host's /usr, /etc, ...) and whose upper layer is a tmpfs, so the
// container may write anywhere (unless readOnlyRootFilesystem) without
// touching the host; /dev and /sys are the host's (/sys read-only, and
// /dev/shm a tmpfs of the container's: files there would outlive it),
// /proc is the pid namespace's own (its sys and sysrq-trigger read-only:
// they are the host kernel's), and the cluster's directory (certificates, the other
// pods' volumes) is hidden under an empty tmpfs. Volume mount points are
// created inside the chroot, so a path through a symlink of the image
// (/var/run -> /run) resolves in the container's root, not the host's.

// containerProc is one run of a container's process.
type containerProc struct {
	cmd      *exec.Cmd
	group    *procgroup.Group // unshare's process group, held by pidfd
	done     chan struct{}    // closed when the process has ended
	exitCode int              // set before done closes: the exit code, or 128+signal
}

// startContainer starts one run of a container.
func (r *podRun) startContainer(c corev1.Container) (*containerProc, error) {
	if len(c.Command) == 0 {
		return nil, &unsupportedError{fmt.Sprintf("container %s without command (there are no images: the entrypoint is not known)", c.Name)}
	}
	env, err := r.env(c)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var argv []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expand(a, vars))
	}
	priv, err := r.privileges(c)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.dir, "ctr", c.Name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	root, rw := filepath.Join(dir, "root"), filepath.Join(dir, "rw")
	for _, d := range []string{root, rw} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	without := r.n.imageWithout(c.Image)
	for _, p := range without {
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("container %s: image %s lacks %q, not an absolute path", c.Name, c.Image, p)
		}
	}
	outer, err := r.scripts(c, root, rw, priv, without)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(r.n.logPath(r.ns, r.name, c.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append([]string{"--mount", "--uts", "--ipc", "--pid", "--fork", "--kill-child", "--propagation", "private", "--", "/bin/sh", "-c", outer, "sh"}, argv...)
	cmd := exec.Command("/usr/bin/unshare", args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = groupDiesWithParent()
	p, err := startContainerProc(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting container %s: %w", c.Name, err)
	}
	return p, nil
}

// startContainerProc starts cmd (unshare, leading its own group) and
// reaps it when it ends.
func startContainerProc(cmd *exec.Cmd) (*containerProc, error) {
	g, err := startLeader(cmd)
	if err != nil {
		return nil, err
	}
	p := &containerProc{cmd: cmd, group: g, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = g.Close()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			p.exitCode = 128 + int(ws.Signal())
		} else {
			p.exitCode = ws.ExitStatus()
		}
		close(p.done)
	}()
	return p, nil
}

// privileges is the setpriv part of a container's start: who it runs as
// and what it may gain.
type privileges struct {
	uid, gid int64
	groups   []int64
	noNewPrivs,
	dropAll bool
	add      []string // capabilities kept in the bounding set with dropAll
	readOnly bool     // readOnlyRootFilesystem
	nonRoot  bool     // runAsNonRoot: refuse uid 0, as the kubelet does
	workdir  string
}

func (r *podRun) privileges(c corev1.Container) (privileges, error) {
	ps := r.pod.Spec.SecurityContext
	if ps == nil {
		ps = &corev1.PodSecurityContext{}
	}
	cs := c.SecurityContext
	if cs == nil {
		cs = &corev1.SecurityContext{}
	}
	pr := privileges{workdir: "/"}
	if c.WorkingDir != "" {
		pr.workdir = c.WorkingDir
	}
	pick := func(a, b *int64) *int64 {
		if a != nil {
			return a
		}
		return b
	}
	if u := pick(cs.RunAsUser, ps.RunAsUser); u != nil {
		pr.uid = *u
	}
	if g := pick(cs.RunAsGroup, ps.RunAsGroup); g != nil {
		pr.gid = *g
	}
	pr.groups = append(pr.groups, ps.SupplementalGroups...)
	if ps.FSGroup != nil {
		pr.groups = append(pr.groups, *ps.FSGroup)
	}
	if (cs.RunAsNonRoot != nil && *cs.RunAsNonRoot) || (cs.RunAsNonRoot == nil && ps.RunAsNonRoot != nil && *ps.RunAsNonRoot) {
		pr.nonRoot = true
		if pr.uid == 0 {
			return pr, fmt.Errorf("container %s has runAsNonRoot and would run as root (uid 0)", c.Name)
		}
	}
	pr.noNewPrivs = cs.AllowPrivilegeEscalation != nil && !*cs.AllowPrivilegeEscalation
	pr.readOnly = cs.ReadOnlyRootFilesystem != nil && *cs.ReadOnlyRootFilesystem
	if cs.Capabilities != nil {
		for _, d := range cs.Capabilities.Drop {
			pr.dropAll = pr.dropAll || strings.EqualFold(string(d), "ALL")
		}
		for _, a := range cs.Capabilities.Add {
			pr.add = append(pr.add, strings.ToLower(strings.TrimPrefix(strings.ToUpper(string(a)), "CAP_")))
		}
	}
	return pr, nil
}

// scripts builds the outer script (the container's root) with the inner
// one (volumes, privileges, exec) in it.
func (r *podRun) scripts(c corev1.Container, root, rw string, pr privileges, without []string) (string, error) {
	r.mu.Lock()
	vols := r.vols
	r.mu.Unlock()
	var outer, inner strings.Builder
	fmt.Fprintf(&outer, "set -e\nR=%s\nW=%s\n", shq(root), shq(rw))
	outer.WriteString(`mount -n -t tmpfs -o size=512m,mode=0755 kubetest "$W"
mkdir "$W/upper" "$W/work"
mount -n -t overlay kubetest -o lowerdir=/,upperdir="$W/upper",workdir="$W/work" "$R"
`)
	// What the image lacks: whiteouts in the overlay's upper layer, made
	// in a chroot of the overlay before anything is mounted into it, so
	// that neither a symlink of the root nor a mount reaches the host.
	for _, p := range without {
		fmt.Fprintf(&outer, "/usr/sbin/chroot \"$R\" /bin/rm -rf -- %s\n", shq(p))
	}
	outer.WriteString(`mount -n --rbind /dev "$R/dev"
mount -n -t tmpfs -o nosuid,nodev,mode=1777,size=64m kubetest "$R/dev/shm"
mount -n -t proc proc "$R/proc"
for p in sys sysrq-trigger; do
	if [ -e "$R/proc/$p" ]; then mount -n --bind "$R/proc/$p" "$R/proc/$p"; mount -n -o remount,bind,ro "$R/proc/$p"; fi
done
mount -n --rbind /sys "$R/sys"
mount -n -o remount,bind,ro "$R/sys"
mkdir -m 0700 "$R/.kubetest"
`)
	inner.WriteString("set -e\n")
	for i, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			return "", fmt.Errorf("container %s mounts volume %s, which the pod does not have", c.Name, vm.Name)
		}
		src := v.path
		if vm.SubPath != "" {
			if !filepath.IsLocal(vm.SubPath) {
				return "", fmt.Errorf("container %s: subPath %q leaves its volume", c.Name, vm.SubPath)
			}
			src = filepath.Join(src, vm.SubPath)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if err := os.MkdirAll(src, 0o777); err != nil { // as the kubelet does for a missing subPath
					return "", err
				}
			}
		}
		st, err := os.Stat(src)
		if err != nil {
			return "", fmt.Errorf("container %s: volume %s: %w", c.Name, vm.Name, err)
		}
		stage := "/.kubetest/" + strconv.Itoa(i)
		target := path.Clean(vm.MountPath)
		if st.IsDir() {
			fmt.Fprintf(&outer, "mkdir \"$R\"%s\n", shq(stage))
			fmt.Fprintf(&inner, "mkdir -p %s\n", shq(target))
		} else {
			fmt.Fprintf(&outer, "touch \"$R\"%s\n", shq(stage))
			fmt.Fprintf(&inner, "mkdir -p %s\n[ -e %s ] || touch %s\n", shq(path.Dir(target)), shq(target), shq(target))
		}
		fmt.Fprintf(&outer, "mount -n --bind %s \"$R\"%s\n", shq(src), shq(stage))
		fmt.Fprintf(&inner, "mount -n --move %s %s\n", shq(stage), shq(target))
		if vm.ReadOnly || v.ro {
			fmt.Fprintf(&inner, "mount -n -o remount,bind,ro %s\n", shq(target))
		}
		fmt.Fprintf(&inner, "rm -d %s\n", shq(stage))
	}
	fmt.Fprintf(&outer, "mount -n -t tmpfs -o size=4k,mode=0755 kubetest \"$R\"%s\n", shq(r.n.c.Dir))
	fmt.Fprintf(&outer, "hostname %s\n", shq(r.name))
	inner.WriteString("rm -d /.kubetest\n")
	fmt.Fprintf(&inner, "mkdir -p %s\n", shq(pr.workdir))
	if pr.readOnly {
		inner.WriteString("mount -n -o remount,bind,ro /\n")
	}
	set := []string{"/usr/bin/setpriv", "--reuid=" + strconv.FormatInt(pr.uid, 10), "--regid=" + strconv.FormatInt(pr.gid, 10)}
	if len(pr.groups) > 0 {
		var gs []string
		for _, g := range pr.groups {
			gs = append(gs, strconv.FormatInt(g, 10))
		}
		set = append(set, "--groups="+strings.Join(gs, ","))
	} else {
		set = append(set, "--clear-groups")
	}
	if pr.noNewPrivs {
		set = append(set, "--no-new-privs")
	}
	if pr.dropAll {
		caps := "-all"
		for _, a := range pr.add {
			caps += ",+" + a
		}
		set = append(set, "--bounding-set="+caps, "--inh-caps=-all")
	}
	set = append(set, "--", "/usr/bin/env", "-C", pr.workdir, "--")
	for i := range set {
		set[i] = shq(set[i])
	}
	fmt.Fprintf(&inner, "exec %s \"$@\"\n", strings.Join(set, " "))
	fmt.Fprintf(&outer, "exec /usr/sbin/chroot \"$R\" /bin/sh -c %s sh \"$@\"\n", shq(inner.String()))
	return outer.String(), nil
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// mainPID is the container's pid 1 (unshare's child) as the host sees it,
// or 0 if there is none (yet, or any more). unshare is checked to be
// unreaped before and after the read: once reaped, its number (and the
// /proc entry by that number) may be another program's.
func (p *containerProc) mainPID() int {
	if !p.unreaped() {
		return 0
	}
	pid := p.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil || !p.unreaped() {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// unreaped reports whether unshare is running or a zombie, by its pidfd:
// a reaped process can no longer be signalled.
func (p *containerProc) unreaped() bool {
	return p.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// signalMain sends sig to the container's pid 1 and reports whether it
// could. The pid is opened as a pidfd and then checked to still be
// unshare's child while unshare is unreaped: a process that took the
// number after pid 1 ended has another parent, and if pid 1 ended after
// the check the pidfd names a dead process, so no other program is hit.
func (p *containerProc) signalMain(sig syscall.Signal) bool {
	pid := p.mainPID()
	if pid <= 0 {
		return false
	}
	proc, err := os.FindProcess(pid) // a pidfd
	if err != nil {
		return false
	}
	defer proc.Release()
	if parentOf(pid) != p.cmd.Process.Pid || !p.unreaped() {
		return false
	}
	return proc.Signal(sig) == nil
}

// parentOf returns the parent pid of process pid, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')') // the name may hold spaces or ')'
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// terminate sends SIGTERM to the container's pid 1. As under a container
// runtime, a pid 1 that does not handle SIGTERM ignores it.
func (p *containerProc) terminate() {
	for range 20 { // the fork may not have happened yet
		if p.signalMain(syscall.SIGTERM) {
			return
		}
		select {
		case <-p.done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // unshare dies and its child with it
}

// kill ends the container: its pid 1, and unshare's group, whose death
// kills the pid 1 (--kill-child) and with it the whole pid namespace.
// Both by pidfd: a container that ended earlier may have left its numbers
// to other programs.
func (p *containerProc) kill() {
	p.signalMain(syscall.SIGKILL)
	_ = p.group.Kill()
}
