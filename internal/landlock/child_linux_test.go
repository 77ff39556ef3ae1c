package landlock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Kernel tests re-exec the test binary (runc / go-sdk style): the child locks
// its OS thread, sets no_new_privs, calls Restrict and runs probes, so the
// test process itself is never restricted.
const childEnv = "MCPBOX_LANDLOCK_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec))
	}
	os.Exit(m.Run())
}

// probe is one operation the restricted child attempts.
type probe struct {
	Name   string
	Op     string // see runProbe
	Path   string
	Path2  string
	Pid    int
	Sig    int
	Port   int
	MinABI int        // the probe is skipped on lower ABIs
	Want   unix.Errno // 0 means the operation must succeed
}

type childSpec struct {
	Policy Policy
	Probes []probe
}

type probeResult struct {
	Errno unix.Errno // 0 on success, ^0 if the error carried no errno
	Err   string
}

type childReport struct {
	ABI         int
	RestrictErr string
	Results     []probeResult
}

func childMain(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "decoding child spec: %v\n", err)
		return 2
	}
	// Restrict locks too, but no_new_privs must be set on the same thread.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "setting no_new_privs: %v\n", err)
		return 2
	}
	var rep childReport
	abi, err := Restrict(spec.Policy)
	rep.ABI = abi
	if err != nil {
		rep.RestrictErr = err.Error()
	} else {
		for _, p := range spec.Probes {
			rep.Results = append(rep.Results, result(runProbe(p)))
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintf(os.Stderr, "encoding report: %v\n", err)
		return 2
	}
	return 0
}

func result(err error) probeResult {
	if err == nil {
		return probeResult{}
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		errno = ^unix.Errno(0)
	}
	return probeResult{Errno: errno, Err: err.Error()}
}

// runProbe performs p on the calling (restricted) thread.
func runProbe(p probe) error {
	switch p.Op {
	case "read":
		_, err := os.ReadFile(p.Path)
		return err
	case "readdir":
		_, err := os.ReadDir(p.Path)
		return err
	case "write":
		return writeFile(p.Path, unix.O_WRONLY)
	case "create":
		return writeFile(p.Path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
	case "open-trunc":
		return writeFile(p.Path, unix.O_WRONLY|unix.O_TRUNC)
	case "truncate":
		return unix.Truncate(p.Path, 0)
	case "mkdir":
		return unix.Mkdir(p.Path, 0o755)
	case "unlink":
		return unix.Unlink(p.Path)
	case "rename":
		return unix.Rename(p.Path, p.Path2)
	case "link":
		return unix.Link(p.Path, p.Path2)
	case "exec":
		return runBounded(p.Path)
	case "ioctl-tcgets":
		fd, err := unix.Open(p.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening: %w", err)
		}
		defer unix.Close(fd)
		_, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err
	case "kill":
		return unix.Kill(p.Pid, unix.Signal(p.Sig))
	case "kill-own":
		return killOwnChild(p.Path)
	case "connect-abstract":
		return connectUnix(p.Path)
	case "connect-tcp":
		return tcpSocket(p.Port, unix.Connect)
	case "bind-tcp":
		return tcpSocket(p.Port, unix.Bind)
	}
	return fmt.Errorf("unknown probe op %q", p.Op)
}

func writeFile(path string, flags int) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte("x"))
	return err
}

// childStdio is passed explicitly: a nil stdio makes os/exec open /dev/null,
// which the policy under test may deny.
func childCmd(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
	cmd.WaitDelay = time.Second
	return cmd
}

func runBounded(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return childCmd(ctx, path).Run()
}

// killOwnChild starts sleep inside the domain and signals it: scoping must
// not block signals to processes in the same domain.
func killOwnChild(sleepPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := childCmd(ctx, sleepPath, "10")
	if err := cmd.Start(); err != nil {
		return err
	}
	err := unix.Kill(cmd.Process.Pid, unix.SIGTERM)
	if err != nil {
		cmd.Process.Kill()
	}
	cmd.Wait()
	return err
}

func connectUnix(name string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("creating socket: %w", err)
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: name})
}

func tcpSocket(port int, op func(int, unix.Sockaddr) error) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("creating socket: %w", err)
	}
	defer unix.Close(fd)
	return op(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// runChild runs spec in a restricted child and returns its report.
func runChild(t *testing.T, spec childSpec) childReport {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatalf("encoding child spec: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("finding test binary: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("running restricted child: %v\nstderr:\n%s", err, stderr.String())
	}
	var rep childReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decoding child report: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("child stderr:\n%s", stderr.String())
	}
	return rep
}

// checkProbes runs spec in a child and checks every probe in its own subtest.
func checkProbes(t *testing.T, spec childSpec) {
	t.Helper()
	rep := runChild(t, spec)
	if rep.RestrictErr != "" {
		t.Fatalf("Restrict in child: %s", rep.RestrictErr)
	}
	if rep.ABI != ABI() {
		t.Errorf("Restrict in child used ABI %d, ABI() in the parent is %d", rep.ABI, ABI())
	}
	if len(rep.Results) != len(spec.Probes) {
		t.Fatalf("child ran %d probes, want %d", len(rep.Results), len(spec.Probes))
	}
	for i, p := range spec.Probes {
		got := rep.Results[i]
		t.Run(p.Name, func(t *testing.T) {
			if rep.ABI < p.MinABI {
				t.Skipf("needs landlock ABI %d, kernel has %d", p.MinABI, rep.ABI)
			}
			if got.Errno != p.Want {
				t.Errorf("%s %s: got %q (errno %d), want %s", p.Op, p.Path, got.Err, got.Errno, errnoName(p.Want))
			}
		})
	}
}

func errnoName(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return fmt.Sprintf("%s (%s)", unix.ErrnoName(e), e.Error())
}
