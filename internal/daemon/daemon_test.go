package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/workspace"
)

// TestRunRefusesBeforeServing: what the config and options cannot serve
// is a *ConfigError (the CLI's usage exit), found before any state dir,
// socket or sandbox is made.
func TestRunRefusesBeforeServing(t *testing.T) {
	t.Setenv("MCPBOX_TEST_CLIENT_TOKEN", "client-token-0123456789")
	load := func(t *testing.T, extra string) *config.Config {
		t.Helper()
		c, err := config.Load("mcpbox.yaml", []byte("version: 1\nsandbox: {require: [userns]}\n"+extra+
			"servers:\n  s: {command: [x], tools: {allow: ['*']}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	clients := "clients: [{name: a, token: {from: env:MCPBOX_TEST_CLIENT_TOKEN}}]\n"
	// A snapshot of server s, for a config where s writes to a fixed dir.
	snap := filepath.Join(t.TempDir(), "s.tar.gz")
	var buf bytes.Buffer
	if err := workspace.Snapshot(&buf, workspace.Meta{Server: "s"}, map[string]string{"output": t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	fixedOut, err := config.Load("mcpbox.yaml", []byte("version: 1\nsandbox: {require: [userns]}\nservers:\n  s: {command: [x], filesystem: {output: {source: ./out}}, tools: {allow: ['*']}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"exposed address", Options{Config: load(t, ""), HTTPAddr: "0.0.0.0:0"}, "without TLS"},
		{"no-auth with clients", Options{Config: load(t, clients), HTTPAddr: "127.0.0.1:0", NoAuth: true}, "has clients"},
		{"no-auth exposed", Options{Config: load(t, ""), HTTPAddr: "0.0.0.0:0", NoAuth: true}, "only a loopback address"},
		{"missing snapshot", Options{Config: load(t, ""), Stdio: true, Snapshot: filepath.Join(t.TempDir(), "none.tar.gz")}, "--from-snapshot"},
		// It would seed nothing: the server's output is a fixed dir.
		{"snapshot of a fixed output", Options{Config: fixedOut, Stdio: true, Snapshot: snap}, "the fixed output dir ./out"},
		{"snapshot of no output", Options{Config: load(t, ""), Stdio: true, Snapshot: snap}, "has no output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			tt.o.StateDir, tt.o.Base = state, t.TempDir()
			err := Run(context.Background(), tt.o)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want a *ConfigError with %q", err, tt.want)
			}
			if _, err := os.Stat(state); err == nil {
				t.Error("the state dir was made before the refusal")
			}
		})
	}
}

// TestRunSetupErrorWithoutSummary: a serve whose servers could not be
// set up (here its one server's input is missing) ends with their
// *SetupError, the host's state, and not a *ConfigError, whether or not
// a startup summary is printed (Options.Summary).
func TestRunSetupErrorWithoutSummary(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nsandbox: {require: [userns]}\nservers:\n  s: {command: [x], filesystem: {input: {source: ./missing}}, tools: {allow: ['*']}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, summary := range []bool{false, true} {
		o := Options{Config: c, Stdio: true, StateDir: filepath.Join(t.TempDir(), "state"), Base: t.TempDir()}
		if summary {
			o.Summary = func(Summary) {}
		}
		err := Run(context.Background(), o)
		var se *SetupError
		var ce *ConfigError
		if !errors.As(err, &se) || errors.As(err, &ce) {
			t.Errorf("summary %v: Run = %v (%T); want the server's *SetupError, not a config error", summary, err, err)
		}
	}
}

// TestStrictCannotStart: serve --strict ends at its start, naming the
// server, when the start's warnings say a server cannot start on this
// machine (here: its secret's variable is not set), as it does for a
// package that does not install; without --strict it serves the other
// server (with none other, it ends as when no server can be set up).
func TestStrictCannotStart(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  s: {command: [sh], secrets: {T: {from: env:MCPBOX_TEST_STRICT_UNSET}}, tools: {allow: ['*']}}\n  ok: {command: [sh], tools: {allow: ['*']}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, strict := range []bool{false, true} {
		o := Options{Config: c, Stdio: true, Strict: strict, StateDir: filepath.Join(t.TempDir(), "state"), Base: t.TempDir(),
			Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
		err := Run(context.Background(), o)
		var se *SetupError
		switch {
		case strict && (!errors.As(err, &se) || se.Server != "s" || !strings.Contains(err.Error(), "MCPBOX_TEST_STRICT_UNSET")):
			t.Errorf("--strict: Run = %v; want server s's setup error naming its variable", err)
		case !strict && err != nil:
			t.Errorf("without --strict: Run = %v; want it to serve", err)
		}
	}
}
