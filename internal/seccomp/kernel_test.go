//go:build linux && (amd64 || arm64)

package seccomp

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	os.Exit(m.Run())
}

// kernelWant is what each child probe must return under the filter.
var kernelWant = map[string]string{
	"install without no_new_privs":  "ErrNoNewPrivs",
	"unshare NEWUSER":               "EPERM",
	"setns":                         "EPERM",
	"umount2":                       "EPERM",
	"keyctl":                        "EPERM",
	"ptrace PEEKUSER":               "EPERM",
	"clone3":                        "ENOSYS",
	"socket tcp":                    "ok",
	"socket udp":                    "ok",
	"socket udp6":                   "ok",
	"socket tcp6":                   "ok",
	"socket unix":                   "ok",
	"socketpair unix":               "ok",
	"net.Dial udp":                  "ok",
	"socket mptcp":                  "EPROTONOSUPPORT",
	"socket sctp":                   "EPROTONOSUPPORT",
	"socket sctp seqpacket":         "ESOCKTNOSUPPORT",
	"socket udplite":                "EPROTONOSUPPORT",
	"socket dccp":                   "EPROTONOSUPPORT",
	"socket l2tp":                   "EPROTONOSUPPORT",
	"socket packet":                 "EAFNOSUPPORT",
	"socket raw icmp":               "EPERM",
	"socket raw inet6":              "EPERM",
	"socket vsock":                  "EAFNOSUPPORT",
	"socket netlink route":          "ok",
	"socket netlink audit":          "EPROTONOSUPPORT",
	"socket netlink generic":        "EPROTONOSUPPORT",
	"net.Interfaces":                "ok",
	"net.Listen tcp":                "ok",
	"ioctl TIOCSTI":                 "EPERM",
	"ioctl TCGETS":                  "EBADF",
	"personality query":             "ok",
	"personality ADDR_NO_RANDOMIZE": "EPERM",
	"openat2":                       "ENOSYS",

	"create 0644":                        "ok",
	"chmod 0755":                         "ok",
	"chmod 04755":                        "EPERM",
	"fchmod 02755":                       "EPERM",
	"fchmodat2 06755":                    "EPERM",
	"open existing, setuid mode ignored": "ok",
	"os.OpenFile O_CREATE setuid":        "EPERM",
	"open O_TMPFILE setgid":              "EPERM",
	"mknodat S_IFREG 04755":              "EPERM",
}

// runChild re-executes the test binary in the given child mode, with env
// added to its environment.
func runChild(t *testing.T, mode string, env ...string) (stdout string, err error) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("seccomp filters unavailable: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("finding test binary: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("child %q timed out\nstdout:\n%s\nstderr:\n%s", mode, &out, &errOut)
	}
	if errOut.Len() > 0 {
		t.Logf("child %q stderr:\n%s", mode, &errOut)
	}
	return out.String(), err
}

func TestKernelFilter(t *testing.T) {
	dir := t.TempDir()
	// World-writable: the child may run as another uid than this test.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatalf("opening the probe directory to the child: %v", err)
	}
	out, err := runChild(t, "probe", childDirEnv+"="+dir)
	if err != nil {
		t.Errorf("child exited: %v\nstdout:\n%s", err, out)
	}
	type outcome struct{ before, after string }
	got := make(map[string]outcome)
	var threads string
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Split(line, "\t")
		switch {
		case f[0] == "probe" && len(f) == 4:
			got[f[1]] = outcome{f[2], f[3]}
		case f[0] == "threads" && len(f) == 2:
			threads = f[1]
		}
	}
	for name, want := range kernelWant {
		t.Run(name, func(t *testing.T) {
			o, ok := got[name]
			switch {
			case !ok && name == "install without no_new_privs" && hasNoNewPrivs(t):
				t.Skip("the test process already runs with no_new_privs")
			case !ok:
				t.Fatalf("child did not report this probe; stdout:\n%s", out)
			case o.after != want:
				t.Errorf("under the filter: %s, want %s", o.after, want)
			case o.before == want:
				t.Skipf("the host answers %s even without the filter; the probe cannot tell", want)
			}
		})
	}
	t.Run("only the calling thread", func(t *testing.T) {
		if !strings.HasPrefix(threads, "self=2 ") || strings.HasSuffix(threads, " unfiltered=0") {
			t.Errorf("threads: %q, want self=2 and at least one unfiltered runtime thread", threads)
		}
	})
	t.Run("survives execve", func(t *testing.T) {
		if ownSeccompMode(t) == "2" {
			t.Skip("the test process itself runs under a seccomp filter")
		}
		for _, want := range []string{"Seccomp:\t2\n", "NoNewPrivs:\t1\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output of the exec'd shell lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("no setid files", func(t *testing.T) { checkNoSetID(t, dir) })
	t.Run("runtimes create files", func(t *testing.T) {
		for _, rt := range []string{"python", "node"} {
			switch {
			case strings.Contains(out, rt+" absent"):
				t.Logf("no %s to try", rt)
			case !strings.Contains(out, rt+" create ok\n"):
				t.Errorf("%s could not create a file under the filter:\n%s", rt, out)
			}
		}
	})
	t.Run("glibc threads", func(t *testing.T) {
		if strings.Contains(out, "python absent") {
			t.Skip("no /usr/bin/python3 to start a pthread")
		}
		if !strings.Contains(out, "python thread ok\n") {
			t.Errorf("python could not start a thread under the filter:\n%s", out)
		}
	})
}

func TestKernelKillsForeignABI(t *testing.T) {
	if foreignSyscall == 0 {
		t.Skip("no foreign ABI reachable from a Go test on this architecture")
	}
	out, err := runChild(t, "kill")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("child: err = %v, want death by SIGSYS; stdout:\n%s", err, out)
	}
	ws := exitErr.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Errorf("child ended with %v, want killed by SIGSYS; stdout:\n%s", ws, out)
	}
}

// checkNoSetID fails if a file in dir has a setid bit, and checks that the
// child's chmod 0755 reached the file, so that the directory is the one the
// child worked in.
func checkNoSetID(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading probe directory: %v", err)
	}
	for _, e := range entries {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s has mode %v, want no setuid or setgid bit", e.Name(), fi.Mode())
		}
		if e.Name() == "plain" && fi.Mode() != 0o755 {
			t.Errorf("plain has mode %v, want -rwxr-xr-x from the allowed chmod", fi.Mode())
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "plain")); err != nil {
		t.Errorf("the child did not create its file: %v", err)
	}
}

func hasNoNewPrivs(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("reading own status: %v", err)
	}
	return strings.Contains(string(b), "NoNewPrivs:\t1\n")
}

func ownSeccompMode(t *testing.T) string {
	t.Helper()
	return seccompField("/proc/self/status")
}
