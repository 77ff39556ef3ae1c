package podagent

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServerCannotReadAgentMemory: a server, running as the agent's
// (non-root) user, cannot read the agent's process (its environ here,
// its mem likewise) once the agent has called hideMemory, as `mcpbox
// agent` does first; without it, it can (the check can fail).
func TestServerCannotReadAgentMemory(t *testing.T) {
	switch os.Getenv("MCPBOX_TEST_MEMORY") {
	case "agent", "agent-dumpable":
		if os.Getenv("MCPBOX_TEST_MEMORY") == "agent" {
			if err := hideMemory(); err != nil {
				os.Stdout.WriteString("hide: " + err.Error())
				os.Exit(3)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestServerCannotReadAgentMemory$")
		cmd.Env = append(os.Environ(), "MCPBOX_TEST_MEMORY=server")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			os.Exit(4)
		}
		os.Exit(0)
	case "server":
		for _, f := range []string{"environ", "mem"} {
			fd, err := os.Open("/proc/" + strconv.Itoa(os.Getppid()) + "/" + f)
			if err == nil {
				fd.Close()
				os.Stdout.WriteString("read:" + f + " ")
			} else {
				os.Stdout.WriteString("denied:" + f + " ")
			}
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the agent as another user")
	}
	// A copy of the test binary the unprivileged user can run.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "agent.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(dst, src)
	src.Close()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	run := func(mode string) string {
		cmd := exec.Command(bin, "-test.run=^TestServerCannotReadAgentMemory$")
		cmd.Dir = dir
		cmd.Env = []string{"MCPBOX_TEST_MEMORY=" + mode, "MCPBOX_TEST_SECRET=tok"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v: %s", mode, err, out)
		}
		return string(out)
	}
	if got := run("agent-dumpable"); !strings.Contains(got, "read:environ") {
		t.Fatalf("a dumpable agent: the server got %q: the test cannot tell", got)
	}
	if got := run("agent"); !strings.Contains(got, "denied:environ") || !strings.Contains(got, "denied:mem") {
		t.Fatalf("the server read the agent's process: %q", got)
	}
}
