package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/ptytest"
)

// TestExecNoNetworkHint: a command that fails in a sandbox without
// network after trying it (a name lookup, an address with no route) is
// followed by one line of mcpbox's saying why and how to allow a host;
// a command that did not try, that succeeded, that was killed, or that ran
// with egress rules gets none.
func TestExecNoNetworkHint(t *testing.T) {
	run := func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, mcpboxBin, append([]string{"exec"}, args...)...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("mcpbox exec %q: %v", args, err)
		}
		return stderr.String(), code
	}
	const hint = "mcpbox: the command tried the network"

	cases := []struct {
		name string
		args []string
		code int
		hint string // a part of the hint; "" for none
	}{
		{"lookup", []string{"--", "sh", "-c", "getent hosts example.com; exit 3"}, 3, "DNS quer"},
		{"no route", []string{"--", "sh", "-c", "curl -sS -m 5 http://192.0.2.1/; exit 4"}, 4, "with no route"},
		{"no try", []string{"--", "sh", "-c", "exit 3"}, 3, ""},
		{"success", []string{"--", "sh", "-c", "getent hosts example.com; exit 0"}, 0, ""},
		{"killed", []string{"--", "sh", "-c", "getent hosts example.com; kill -TERM $$"}, 128 + 15, ""},
		{"egress", []string{"--allow-host", "example.org", "--", "sh", "-c", "curl -sS -m 5 --noproxy '*' http://192.0.2.1/; exit 3"}, 3, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stderr, code := run(c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s", code, c.code, stderr)
			}
			n := strings.Count(stderr, hint)
			switch {
			case c.hint == "" && n != 0:
				t.Fatalf("a hint where none is due:\n%s", stderr)
			case c.hint != "" && (n != 1 || !strings.Contains(stderr, c.hint) || !strings.Contains(stderr, "--allow-host HOST")):
				t.Fatalf("want one hint naming %q:\n%s", c.hint, stderr)
			}
		})
	}
}

// tostopScript takes the terminal from the sandbox init: with TOSTOP set
// and its own process group in the foreground, a write by the init (now
// in the background) makes the kernel stop it with SIGTTOU and restart
// it, for ever unless the init ignores the signal. Then it tries the
// network and fails.
const tostopScript = `
import os, signal, socket, sys, termios
a = termios.tcgetattr(2); a[3] |= termios.TOSTOP; termios.tcsetattr(2, termios.TCSANOW, a)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
os.setpgid(0, 0)
os.tcsetpgrp(2, os.getpgrp())
try:
    socket.getaddrinfo("example.com", 80)
except OSError:
    pass
sys.exit(1)
`

// TestExecNoNetworkHintTerminal: on a terminal the workload owns, the
// init's hint can neither hang the sandbox's end nor be lost.
func TestExecNoNetworkHintTerminal(t *testing.T) {
	ptmx, pts := ptytest.Open(t)
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			k, err := ptmx.Read(buf)
			out.Write(buf[:k])
			if err != nil {
				return // EIO once the last slave end is closed
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpboxBin, "exec", "--", "python3", "-c", tostopScript)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	err := cmd.Run()
	pts.Close()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the terminal stayed open after mcpbox exited")
	}
	if ctx.Err() != nil {
		t.Fatalf("mcpbox exec hung on the terminal the workload took (killed after 30 s):\n%s", out.String())
	}
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("mcpbox exec: %v, want exit 1\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "mcpbox: the command tried the network") {
		t.Fatalf("no hint on the terminal:\n%s", out.String())
	}
}
