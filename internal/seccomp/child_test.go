//go:build linux && (amd64 || arm64)

package seccomp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// childEnv selects a child mode when the test binary re-executes itself
// (the runc / go-sdk pattern): "probe" runs probes under the filter and
// then execs a shell; "kill" makes a foreign-ABI syscall that must kill it.
const childEnv = "MCPBOX_SECCOMP_TEST_CHILD"

// childDirEnv names the world-writable directory where the "probe" child
// creates files and tries to make them setuid or setgid.
const childDirEnv = "MCPBOX_SECCOMP_TEST_DIR"

// shellScript runs after the child execs under its filter: it shows the
// filter survived execve and fork, and that glibc threads still start
// (pthread_create tries clone3 first and must fall back to clone).
const shellScript = `set -e
grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status
if [ -x /usr/bin/python3 ]; then
	/usr/bin/python3 -I -c 'import threading; t = threading.Thread(target=print, args=("python thread ok",)); t.start(); t.join()'
else
	echo "python absent"
fi
if [ -x /usr/bin/python3 ] && [ -n "$MCPBOX_SECCOMP_TEST_DIR" ]; then
	/usr/bin/python3 -I -c 'import os; open(os.path.join(os.environ["MCPBOX_SECCOMP_TEST_DIR"], "python"), "x").write("x"); print("python create ok")'
fi
if command -v node >/dev/null && [ -n "$MCPBOX_SECCOMP_TEST_DIR" ]; then
	node -e 'require("fs").writeFileSync(process.env.MCPBOX_SECCOMP_TEST_DIR + "/node", "x", {flag: "wx"}); console.log("node create ok")'
else
	echo "node absent"
fi
exit 0`

// probe is one syscall the child makes under the filter. Probes marked
// control have no effect when they succeed, so they also run before the
// filter: the parent then checks the filter changed the answer.
type probe struct {
	name    string
	control bool
	run     func() error
}

func childProbes() []probe {
	return []probe{
		{"unshare NEWUSER", true, func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
		{"setns", true, func() error { return unix.Setns(-1, 0) }},
		{"umount2", true, func() error { return unix.Unmount("/nonexistent-mcpbox-seccomp-probe", 0) }},
		{"keyctl", true, func() error {
			_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
			return err
		}},
		// PEEKUSER on ourselves fails with ESRCH without the filter and has
		// no side effect, unlike PTRACE_TRACEME.
		{"ptrace PEEKUSER", true, func() error {
			return rawSyscall(unix.SYS_PTRACE, unix.PTRACE_PEEKUSR, uintptr(unix.Getpid()), 0)
		}},
		// clone3 with a NULL, zero-sized argument is EINVAL without the
		// filter; it never creates a process.
		{"clone3", true, func() error { return rawSyscall(unix.SYS_CLONE3, 0, 0, 0) }},
		{"socket tcp", false, func() error { return socketProbe(unix.AF_INET, unix.SOCK_STREAM, 0) }},
		{"socket mptcp", true, func() error { return socketProbe(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP) }},
		{"socket udp", false, func() error { return socketProbe(unix.AF_INET, unix.SOCK_DGRAM, 0) }},
		{"socket udp6", false, func() error { return socketProbe(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP) }},
		{"socket tcp6", false, func() error { return socketProbe(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, unix.IPPROTO_TCP) }},
		{"socket unix", false, func() error { return socketProbe(unix.AF_UNIX, unix.SOCK_STREAM, 0) }},
		{"socketpair unix", false, func() error {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
			return err
		}},
		{"socket sctp", true, func() error { return socketProbe(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP) }},
		{"socket sctp seqpacket", true, func() error { return socketProbe(unix.AF_INET6, unix.SOCK_SEQPACKET, 0) }},
		{"socket udplite", true, func() error { return socketProbe(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE) }},
		{"socket dccp", true, func() error { return socketProbe(unix.AF_INET, unix.SOCK_DCCP, unix.IPPROTO_DCCP) }},
		{"socket l2tp", true, func() error { return socketProbe(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_L2TP) }},
		{"socket packet", true, func() error { return socketProbe(unix.AF_PACKET, unix.SOCK_RAW, 0x0300) }},
		{"socket raw icmp", true, func() error { return socketProbe(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP) }},
		{"socket raw inet6", true, func() error { return socketProbe(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6) }},
		{"socket vsock", true, func() error { return socketProbe(unix.AF_VSOCK, unix.SOCK_STREAM, 0) }},
		{"socket netlink route", false, func() error { return socketProbe(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE) }},
		{"socket netlink audit", true, func() error { return socketProbe(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT) }},
		{"socket netlink generic", true, func() error { return socketProbe(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_GENERIC) }},
		{"net.Dial udp", false, func() error {
			c, err := net.Dial("udp", "127.0.0.1:9")
			if err == nil {
				c.Close()
			}
			return err
		}},
		{"net.Interfaces", false, func() error { _, err := net.Interfaces(); return err }},
		{"net.Listen tcp", false, func() error {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err == nil {
				l.Close()
			}
			return err
		}},
		{"ioctl TIOCSTI", true, func() error { return rawSyscall(unix.SYS_IOCTL, badFD, unix.TIOCSTI, 0) }},
		{"ioctl TCGETS", false, func() error { return rawSyscall(unix.SYS_IOCTL, badFD, unix.TCGETS, 0) }},
		{"personality query", false, func() error { return rawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0) }},
		{"personality ADDR_NO_RANDOMIZE", false, func() error {
			return rawSyscall(unix.SYS_PERSONALITY, addrNoRandomize, 0, 0)
		}},
		// Opening / read-only has no side effect, and shows that the kernel
		// would have served openat2 without the filter.
		{"openat2", true, func() error {
			fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC})
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
	}
}

// modeProbes create files in dir and try to give them setid bits. They
// change the directory, so they run under the filter only; the parent
// checks the files afterwards. Go's os.OpenFile is probed on its own: it
// turns os.ModeSetuid into S_ISUID in the mode it passes to openat.
func modeProbes(dir string) []probe {
	plain := filepath.Join(dir, "plain")
	return []probe{
		{"create 0644", false, func() error { return createProbe(plain, 0o644) }},
		{"chmod 0755", false, func() error { return unix.Chmod(plain, 0o755) }},
		{"chmod 04755", false, func() error { return unix.Chmod(plain, unix.S_ISUID|0o755) }},
		{"fchmod 02755", false, func() error {
			fd, err := unix.Open(plain, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Fchmod(fd, unix.S_ISGID|0o755)
		}},
		// A flag makes x/sys use fchmodat2.
		{"fchmodat2 06755", false, func() error {
			return unix.Fchmodat(unix.AT_FDCWD, plain, unix.S_ISUID|unix.S_ISGID|0o755, unix.AT_SYMLINK_NOFOLLOW)
		}},
		{"open existing, setuid mode ignored", false, func() error {
			fd, err := unix.Open(plain, unix.O_RDONLY|unix.O_CLOEXEC, unix.S_ISUID|0o7777)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"os.OpenFile O_CREATE setuid", false, func() error {
			f, err := os.OpenFile(filepath.Join(dir, "openfile"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, os.ModeSetuid|0o755)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"open O_TMPFILE setgid", false, func() error {
			fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, unix.S_ISGID|0o755)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"mknodat S_IFREG 04755", false, func() error {
			return unix.Mknodat(unix.AT_FDCWD, filepath.Join(dir, "mknod"), unix.S_IFREG|unix.S_ISUID|0o755, 0)
		}},
	}
}

func createProbe(path string, mode uint32) error {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, mode)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// badFD is fd -1 as a syscall argument: the kernel answers EBADF once the
// filter lets the call through.
const badFD = ^uintptr(0)

func rawSyscall(nr, a1, a2, a3 uintptr) error {
	_, _, errno := unix.Syscall(nr, a1, a2, a3)
	if errno != 0 {
		return errno
	}
	return nil
}

func socketProbe(domain, typ, proto int) error {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// result names an outcome the way the parent expects it.
func result(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNoNewPrivs):
		return "ErrNoNewPrivs"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return strings.ReplaceAll(err.Error(), "\t", " ")
}

// childMain runs in the re-executed test binary. It prints one line per
// probe, "probe\tNAME\tBEFORE\tAFTER", then replaces itself with a shell.
func childMain(mode string) int {
	runtime.LockOSThread()
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		fmt.Fprintln(os.Stderr, "limiting core size:", err)
		return 2
	}
	if mode == "kill" {
		return childKill()
	}
	probes := childProbes()
	if dir := os.Getenv(childDirEnv); dir != "" {
		probes = append(probes, modeProbes(dir)...)
	}
	before := make([]string, len(probes))
	for i, p := range probes {
		before[i] = "-"
		if p.control {
			before[i] = result(p.run())
		}
	}
	if err := installFilter(true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for i, p := range probes {
		fmt.Printf("probe\t%s\t%s\t%s\n", p.name, before[i], result(p.run()))
	}
	fmt.Printf("threads\t%s\n", threadSeccomp())
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", shellScript}, os.Environ())
	fmt.Fprintln(os.Stderr, "exec /bin/sh:", err)
	return 3
}

// installFilter installs the default filter on this thread, first showing
// that Install refuses to run without no_new_privs.
func installFilter(report bool) error {
	prog, err := Program(Options{})
	if err != nil {
		return err
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return err
	}
	if report && nnp == 0 {
		fmt.Printf("probe\tinstall without no_new_privs\t-\t%s\n", result(Install(prog)))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	return Install(prog)
}

// childKill installs the filter and makes a syscall of a foreign ABI; the
// kernel must kill the process with SIGSYS before it prints anything.
func childKill() int {
	if err := installFilter(false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, _, errno := unix.Syscall(foreignSyscall, 0, 0, 0)
	fmt.Printf("survived foreign syscall %#x: errno %v\n", foreignSyscall, errno)
	return 0
}

// threadSeccomp reports the seccomp mode of this thread and how many other
// threads of the process run without a filter. Install must not use
// TSYNC, so the Go runtime's other threads (sysmon at least) stay at 0.
func threadSeccomp() string {
	self := seccompField("/proc/thread-self/status")
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	unfiltered := 0
	for _, path := range tasks {
		if seccompField(path) == "0" {
			unfiltered++
		}
	}
	return fmt.Sprintf("self=%s unfiltered=%d", self, unfiltered)
}

func seccompField(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unreadable"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "missing"
}
