package initproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// The rootfs is built the way bubblewrap builds it: a tmpfs is mounted on
// /tmp of the (private) mount namespace and pivoted into, so the host tree
// stays reachable under /oldroot while the new root is assembled in
// /newroot; a second pivot then drops the host tree for good.
const (
	oldRoot = "/oldroot"
	newRoot = "/newroot"
)

// mountError names the operation, paths and flags of a failed mount step
// (runc's mountError): "operation not permitted" alone helps nobody.
type mountError struct {
	op     string
	source string
	target string
	flags  uintptr
	err    error
}

func (e *mountError) Error() string {
	s := e.op + " " + e.target
	if e.source != "" {
		s = e.op + " " + e.source + " on " + e.target
	}
	if e.flags != 0 {
		s += " (flags 0x" + strconv.FormatUint(uint64(e.flags), 16) + ")"
	}
	return s + ": " + e.err.Error()
}

func (e *mountError) Unwrap() error { return e.err }

func mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return &mountError{op: "mounting", source: source, target: target, flags: flags, err: err}
	}
	return nil
}

// setattr applies mount attributes to target and every mount below it.
// mount_setattr (Linux 5.12) is recursive, unlike a remount, so submounts
// of a bound /usr cannot stay writable.
func setattr(target string, set uint64) error {
	attr := unix.MountAttr{Attr_set: set}
	if err := unix.MountSetattr(unix.AT_FDCWD, target, unix.AT_RECURSIVE, &attr); err != nil {
		return &mountError{op: "setting attributes of", target: target, flags: uintptr(set), err: err}
	}
	return nil
}

// bindSpec is one bind mount inside the sandbox as the init sees it.
type bindSpec struct {
	Source   string `json:"source"` // host path; the init reads it under /oldroot
	Target   string `json:"target"` // path inside the sandbox
	Writable bool   `json:"writable,omitempty"`
	Exec     bool   `json:"exec,omitempty"`
	// IdmapFD, when > 0, is the index (in the received fds) of a detached,
	// idmapped clone of Source prepared by the host (host-root mode).
	IdmapFD int  `json:"idmap_fd,omitempty"`
	File    bool `json:"file,omitempty"` // Source is not a directory
	// Cover: the target is an existing file of the system view (a system
	// trust bundle) that this bind, the sandbox's own, covers.
	Cover bool `json:"cover,omitempty"`
	// KeepGit leaves the .git of a writable bind's repositories as
	// writable as the rest: the host plans no GitOps for it.
	KeepGit bool `json:"keep_git,omitempty"`
	// GitOps is what holdGit mounts beneath the bind, in order.
	GitOps []gitOp `json:"git_ops,omitempty"`
	// Dev and Ino identify the source the host checked: the init binds
	// it only if the path still leads to the same file, without symlinks.
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// systemBinds are the read-only, executable host paths every sandbox sees.
var systemBinds = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcBinds are the host files and directories of the curated /etc. passwd,
// group, hosts, hostname, resolv.conf and nsswitch.conf are synthesized.
var etcBinds = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
	// Certificates only: /etc/ssl/private and /etc/pki/tls/private hold keys.
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/ca-certificates.conf",
	"/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/ca-trust", "/etc/crypto-policies",
	"/etc/alternatives", "/etc/protocols", "/etc/services", "/etc/mime.types",
	// What a headless browser reads: fontconfig's config, and Debian's
	// chromium launcher settings (flags, the distribution's public API
	// keys, master_preferences, admin policies). No secrets live there.
	"/etc/fonts", "/etc/chromium", "/etc/chromium.d",
}

// shmMax caps /dev/shm, which takes tmpfs memory besides /tmp.
const shmMax = 64 << 20

// tmpInodes bounds /tmp's inodes (kernel memory a cgroup-less sandbox
// could otherwise pile up): one per 4 KiB of size, at least 4096.
func tmpInodes(size int64) int64 { return max(size/4096, 4096) }

// devNodes are bound from the host's /dev; everything else in /dev is new.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// buildRoot assembles the sandbox root and pivots into it. It runs in the
// init, inside the new user and mount namespaces, as uid 0 there.
func buildRoot(c *initConfig, fds []int) error {
	// Nothing we mount may propagate back to the host.
	if err := mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return err
	}
	if err := mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return err
	}
	if err := os.Chdir("/tmp"); err != nil {
		return err
	}
	for _, d := range []string{"oldroot", "newroot"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.PivotRoot(".", "oldroot"); err != nil {
		return &mountError{op: "pivoting root to", target: "/tmp", err: err}
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m"); err != nil {
		return err
	}
	steps := []func(*initConfig, []int) error{
		bindSystem, buildEtc, buildDev, mountProc, mountTmp, bindUser, holdGit, mountOverlay, maskInput, writeSecrets,
	}
	for _, step := range steps {
		if err := step(c, fds); err != nil {
			return err
		}
	}
	return pivotFinal()
}

// pivotFinal makes /newroot the root, drops the host tree and turns the
// root read-only. pivot_root(".", ".") stacks the old root on top of the
// new one, so one lazy unmount removes the host tree (runc's trick).
func pivotFinal() error {
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return &mountError{op: "pivoting root to", target: newRoot, err: err}
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return &mountError{op: "unmounting old root", target: "/", err: err}
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &attr); err != nil {
		return &mountError{op: "making root read-only", target: "/", err: err}
	}
	return nil
}

func bindSystem(c *initConfig, fds []int) error {
	if c.Root != nil {
		return bindImage(c.Root, fds)
	}
	for _, p := range systemBinds {
		if err := copyOrBind(oldRoot+p, newRoot+p, true); err != nil {
			return err
		}
	}
	return nil
}

// bindRO binds host onto target (created as a dir or empty file) read-only,
// nosuid and nodev; noexec unless exec.
func bindRO(host, target string, dir, exec bool) error {
	if err := mkTarget(target, dir); err != nil {
		return err
	}
	if err := mount(host, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	attr := uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !exec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	return setattr(target, attr)
}

func mkTarget(target string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if dir {
		err := os.Mkdir(target, 0o755)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}
	// A file that exists already (one of a read-only system bind, which
	// the trust bundle covers) is a mount point as it is.
	if st, err := os.Lstat(target); err == nil && st.Mode().IsRegular() {
		return nil
	}
	fd, err := unix.Open(target, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "open", Path: target, Err: err}
	}
	return unix.Close(fd)
}

// writeFile is os.WriteFile in raw system calls. os opens every file
// for the poller, five more system calls per file (fcntl twice to make it
// non-blocking, epoll_ctl, which a regular file refuses, fcntl twice to
// undo it), which the init, writing a dozen files per start, does without.
func writeFile(path string, data []byte, perm uint32) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, perm)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

func buildEtc(c *initConfig, _ []int) error {
	etc := newRoot + "/etc"
	if err := os.Mkdir(etc, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"passwd":        "root:x:0:0:root:/root:/bin/sh\n" + sandboxUser + ":x:" + strconv.Itoa(sandboxUID) + ":" + strconv.Itoa(sandboxUID) + ":mcpbox sandbox:" + sandboxHome + ":/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\n" + sandboxUser + ":x:" + strconv.Itoa(sandboxUID) + ":\nnogroup:x:65534:\n",
		"hosts":         "127.0.0.1\tlocalhost " + c.Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"hostname":      c.Hostname + "\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
		// No nameserver: the network namespace is empty, and egress goes
		// through a proxy that resolves names itself.
		"resolv.conf": "# mcpbox: no DNS inside the sandbox\noptions timeout:1 attempts:1\n",
	}
	if len(c.Transparent) > 0 { // only with Egress
		// The init's own DNS, which gives names addresses that lead to
		// the proxy (transparent_linux.go).
		files["resolv.conf"] = "# mcpbox: names lead to the egress proxy\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"
	}
	for name, content := range files {
		if err := writeFile(etc+"/"+name, []byte(content), 0o644); err != nil {
			return err
		}
	}
	if c.Root != nil {
		return bindImageEtc(files)
	}
	for _, p := range etcBinds {
		if err := copyOrBind(oldRoot+p, newRoot+p, false); err != nil {
			return err
		}
	}
	return nil
}

// copyOrBind recreates a host symlink (merged-/usr systems have /bin ->
// usr/bin), or binds a file or dir read-only, executable if exec; a
// missing host path is skipped.
func copyOrBind(host, target string, exec bool) error {
	fi, err := os.Lstat(host)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		dest, err := os.Readlink(host)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.Symlink(dest, target)
	}
	return bindRO(host, target, fi.IsDir(), exec)
}

func buildDev(c *initConfig, _ []int) error {
	dev := newRoot + "/dev"
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, n := range devNodes {
		if err := mkTarget(dev+"/"+n, false); err != nil {
			return err
		}
		if err := mount(oldRoot+"/dev/"+n, dev+"/"+n, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(dev+"/"+d, 0o755); err != nil {
			return err
		}
	}
	if err := mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620,max=256"); err != nil {
		return err
	}
	shm := "mode=1777,nr_inodes=4096,size=" + strconv.FormatInt(min(c.TmpSize, shmMax), 10)
	if err := mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, shm); err != nil {
		return err
	}
	links := map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	}
	for name, dest := range links {
		if err := os.Symlink(dest, dev+"/"+name); err != nil {
			return err
		}
	}
	// The device nodes, pts and shm are mounts of their own and stay
	// usable; /dev itself takes no new entries.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, dev, 0, &attr); err != nil {
		return &mountError{op: "making read-only", target: dev, err: err}
	}
	return nil
}

// procMasked are host-wide files and directories of /proc that a pid
// namespace does not scope, hidden the way runc hides them: /dev/null
// over a file, an empty read-only tmpfs over a directory. /proc/keys and
// /proc/key-users list the kernel keys (descriptions, serials) and key
// quotas of the host user the sandbox runs as; the others show host
// hardware, timers, scheduler internals and kernel memory. proc's
// subset=pid would hide them all, but also /proc/meminfo, /proc/cpuinfo,
// /proc/stat and /proc/sys, which node, python and the Go runtime read.
var procMasked = []string{
	"keys", "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats",
	"kcore", "sysrq-trigger", "interrupts", "acpi", "asound", "scsi",
}

// procReadOnly are the /proc subtrees that set host or namespace state on
// write; the workload keeps reading them.
var procReadOnly = []string{"sys", "bus", "fs", "irq"}

// mountProc mounts a fresh proc for the new pid namespace, then masks and
// write-protects its host-wide parts. hidepid=invisible hides processes
// the viewer may not ptrace: the non-dumpable init. The masks are mounts
// of the init's user namespace: the workload, in a nested one without
// capabilities and under seccomp, cannot unmount them.
func mountProc(_ *initConfig, _ []int) error {
	p := newRoot + "/proc"
	if err := os.Mkdir(p, 0o555); err != nil {
		return err
	}
	if err := mount("proc", p, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
		return err
	}
	for _, name := range procMasked {
		if err := maskPath(p + "/" + name); err != nil {
			return err
		}
	}
	for _, name := range procReadOnly {
		if err := bindReadOnly(p + "/" + name); err != nil {
			return err
		}
	}
	return nil
}

// maskPath hides target, if it exists: a directory under an empty
// read-only tmpfs, anything else under the sandbox's /dev/null, which
// reads as empty.
func maskPath(target string) error {
	fi, err := os.Lstat(target)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("masking %s: %w", target, err)
	}
	if fi.IsDir() {
		return mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0555,size=4k,nr_inodes=2")
	}
	if err := mount(newRoot+"/dev/null", target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return setattr(target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
}

// bindReadOnly binds target, if it exists, onto itself read-only.
func bindReadOnly(target string) error {
	if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := mount(target, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return setattr(target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

func mountTmp(c *initConfig, _ []int) error {
	t := newRoot + "/tmp"
	if err := os.Mkdir(t, 0o755); err != nil {
		return err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !c.ExecWritable {
		flags |= unix.MS_NOEXEC
	}
	opts := "mode=1777,size=" + strconv.FormatInt(c.TmpSize, 10) + ",nr_inodes=" + strconv.FormatInt(tmpInodes(c.TmpSize), 10)
	if err := mount("tmpfs", t, "tmpfs", flags, opts); err != nil {
		return err
	}
	return os.Mkdir(t+"/home", 0o700)
}

// bindUser binds the workspace and extra mounts. Each source is opened
// once, without following symlinks, and checked against the file the host
// vetted, then cloned from that fd: a path swapped for a symlink in the
// meantime cannot redirect the mount. In host-root mode the host passed
// idmapped clones instead (see idmap_linux.go).
func bindUser(c *initConfig, fds []int) error {
	if err := os.MkdirAll(newRoot+"/workspace", 0o755); err != nil {
		return err
	}
	for _, b := range c.Binds {
		target := newRoot + b.Target
		switch {
		case b.Cover:
			// The file the host found, reached without symlinks: one
			// would resolve here against the staging root, not the
			// sandbox's.
			if err := regularNoSymlinks(target); err != nil {
				return fmt.Errorf("covering %s with the trust bundle: %w", b.Target, err)
			}
		case b.File:
			// Only the trust bundle covers a file of the system view: a
			// config mount must not silently replace, say, /usr/bin/node.
			if st, err := os.Lstat(target); err == nil && st.Mode().IsRegular() {
				return fmt.Errorf("creating mount point %s: it would cover a file of the system view", b.Target)
			}
		}
		if err := mkTarget(target, !b.File); err != nil {
			return fmt.Errorf("creating mount point %s: %w", b.Target, err)
		}
		if err := attachBind(b, target, fds); err != nil {
			return err
		}
	}
	return nil
}

// regularNoSymlinks checks that path is a regular file reached without
// following a symlink.
func regularNoSymlinks(path string) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file")
	}
	return nil
}

// attachBind mounts b's source (or its idmapped clone) on target, which
// exists, with b's attributes.
func attachBind(b bindSpec, target string, fds []int) error {
	tree := -1
	if b.IdmapFD > 0 {
		tree = fds[b.IdmapFD-1]
	} else {
		fd, err := cloneSource(oldRoot, b)
		if err != nil {
			return err
		}
		tree = fd
	}
	err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
	unix.Close(tree)
	if err != nil {
		return &mountError{op: "attaching", source: b.Source, target: target, err: err}
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !b.Writable {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if !b.Exec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	return setattr(target, attr)
}

// cloneSource returns a detached copy of the mount tree at b's source,
// found under root.
func cloneSource(root string, b bindSpec) (int, error) {
	fd, err := openNoSymlinks(root + b.Source)
	if err != nil {
		return -1, fmt.Errorf("opening mount source %s: %w", b.Source, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, err
	}
	if st.Dev != b.Dev || st.Ino != b.Ino {
		return -1, fmt.Errorf("mount source %s changed since it was checked; refusing to mount it", b.Source)
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, &mountError{op: "cloning", source: b.Source, target: b.Target, err: err}
	}
	return tree, nil
}

// openNoSymlinks opens path as an O_PATH fd, failing if any component is a
// symlink: mount sources arrive with symlinks already resolved.
func openNoSymlinks(path string) (int, error) {
	return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// writeSecrets puts the file secrets in a tmpfs of their own at
// /run/secrets: files mode 0400, owned by the sandbox user (the init's
// uid), then the mount is made read-only. Nothing of it touches a host
// file system.
func writeSecrets(c *initConfig, _ []int) error {
	if len(c.SecretFiles) == 0 {
		return nil
	}
	dir := newRoot + secretsDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=1m,nr_inodes=256"); err != nil {
		return err
	}
	for _, f := range c.SecretFiles {
		if err := writeFile(dir+"/"+f.Name, f.Value, 0o400); err != nil {
			return fmt.Errorf("writing secret %s: %w", f.Name, err)
		}
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		return err
	}
	return setattr(dir, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}
