package e2e

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTerminal runs mcpbox on a terminal (script(1) makes one): one ^C
// reaches the workload exactly once, and the workload can read the
// terminal, which needs its process group in the foreground.
func TestTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inner := mcpboxBin + ` exec -- sh -c 'trap "echo got-int" INT; echo ready; sleep 1; sleep 1; read line; echo read:$line'`
	cmd := exec.CommandContext(ctx, script, "-qfec", inner, "/dev/null")
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	var seen strings.Builder
	waitFor := func(s string) {
		t.Helper()
		for !strings.Contains(seen.String(), s) {
			line, err := out.ReadString('\n')
			seen.WriteString(line)
			if err != nil {
				t.Fatalf("waiting for %q: %v; terminal so far:\n%s", s, err, seen.String())
			}
		}
	}
	waitFor("ready")
	io.WriteString(stdin, "\x03")
	waitFor("got-int")
	io.WriteString(stdin, "hello\r")
	waitFor("read:hello")
	if n := strings.Count(seen.String(), "got-int"); n != 1 {
		t.Fatalf("one ^C arrived %d times:\n%s", n, seen.String())
	}
}
