package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

const platformTestConfig = "version: 1\n" +
	"backend: {kind: kubernetes, namespace: mcp, kubeconfig: /k/config, image: r/b:1}\n" +
	"servers:\n" +
	"  pod: {command: [srv]}\n" +
	"  remote: {url: https://mcp.example.com/mcp}\n" +
	"  here: {command: [srv], backend: {kind: local}}\n" +
	"  there: {command: [srv], backend: {kind: local}}\n"

// TestCheckPlatform: on a system without local sandboxes (macOS) the
// servers of the local backend, and only those, are refused as a config
// error that names them and says what to do; Linux refuses none, and a
// config whose servers all run in pods or remotely passes anywhere.
func TestCheckPlatform(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte(platformTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlatform(c, "linux"); err != nil {
		t.Errorf("linux: %v", err)
	}
	err = checkPlatform(c, "darwin")
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, sandbox.ErrNeedsLinux) {
		t.Fatalf("darwin: %v; want a *ConfigError of sandbox.ErrNeedsLinux", err)
	}
	if want := "servers here, there: local sandboxes need Linux; use backend: kubernetes"; err.Error() != want {
		t.Errorf("darwin: %q, want %q", err, want)
	}
	c.Servers = c.Servers[:2] // pod, remote
	if err := checkPlatform(c, "darwin"); err != nil {
		t.Errorf("darwin, no local server: %v", err)
	}
}

// TestDarwinRefusesLocalAtOnce: serve, run and update on macOS (goos set
// as there) refuse a local server with sandbox.ErrNeedsLinux as a
// *ConfigError (the CLI's exit 2) before a state dir or anything else is
// made; macOS binaries cannot run in CI, so this is where the path runs.
func TestDarwinRefusesLocalAtOnce(t *testing.T) {
	defer func(g string) { goos = g }(goos)
	goos = "darwin"
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  s: {command: [x]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sandbox.ErrNeedsLinux) || !strings.Contains(err.Error(), "use backend: kubernetes") {
			t.Errorf("%s = %v; want a *ConfigError of sandbox.ErrNeedsLinux", what, err)
		}
	}
	state := filepath.Join(t.TempDir(), "state")
	check("Run", Run(context.Background(), Options{Config: c, Stdio: true, StateDir: state, Base: t.TempDir()}))
	check("RunServer", RunServer(context.Background(), ServerOptions{Name: "x", Spec: sandbox.Spec{Args: []string{"x"}}, StateDir: state}))
	check("NewLister", func() error { _, err := NewLister(ListOptions{Config: c, StateDir: state}); return err }())
	check("CheckUpdate", func() error {
		_, err := CheckUpdate(context.Background(), ListOptions{Config: c, StateDir: state}, "s")
		return err
	}())
	if _, err := os.Stat(state); err == nil {
		t.Error("the state dir was made before the refusal")
	}
}
