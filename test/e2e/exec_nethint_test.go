package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
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
