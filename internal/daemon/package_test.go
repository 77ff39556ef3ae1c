package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mcpbox/internal/config"
)

func TestPackageServers(t *testing.T) {
	c, err := config.Load("c.yaml", []byte(`version: 1
servers:
  npx: {command: [npx, -y, "@modelcontextprotocol/server-memory@2026.8.31", --flag]}
  uvx: {command: [uvx, mcp-server-fetch, --ignore-robots-txt]}
  pkg: {package: "npm:left-pad@^1", args: [a]}
  plain: {command: [node, server.js]}
`))
	if err != nil {
		t.Fatal(err)
	}
	pss, err := PackageServers(c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ps := range pss {
		got[ps.Server.Name] = ps.Source.String() + " " + strings.Join(ps.Args, " ")
	}
	want := map[string]string{
		"npx": "npm:@modelcontextprotocol/server-memory@2026.8.31 --flag",
		"uvx": "pypi:mcp-server-fetch@latest --ignore-robots-txt",
		"pkg": "npm:left-pad@^1 a",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	// The config keeps what the user wrote.
	if !slices.Equal(c.Server("npx").Command, []string{"npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31", "--flag"}) {
		t.Errorf("command changed: %q", c.Server("npx").Command)
	}
}

func TestPackageServersErrors(t *testing.T) {
	c, err := config.Load("c.yaml", []byte(`version: 1
servers:
  shell:
    command: [npx, -c, "echo hi"]
  git:
    package: "npm:github:org/repo"
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = PackageServers(c)
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *ConfigError", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "c.yaml:4:14: servers.shell.command: ") ||
		!strings.HasPrefix(lines[1], "c.yaml:6:14: servers.git.package: ") {
		t.Fatalf("errors:\n%v", err)
	}
}

// TestRunRefusesUnpinnableRunner: a runner form that cannot be installed
// as a pinned package is a *ConfigError with its position, before the
// state dir is made.
func TestRunRefusesUnpinnableRunner(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  s: {command: [npx, -c, 'echo hi'], tools: {allow: ['*']}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	err = Run(context.Background(), Options{Config: c, Stdio: true, StateDir: state, Base: t.TempDir()})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "mcpbox.yaml:3:16: servers.s.command: ") {
		t.Fatalf("Run = %v, want a *ConfigError at mcpbox.yaml:3:16", err)
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("the state dir was made before the refusal")
	}
}

// TestHoldsData: a regular file with data holds data, at its path or
// under "~/"; an empty file, a directory and a missing path do not.
func TestHoldsData(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "memory.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "empty.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"~/memory.jsonl": true, filepath.Join(home, "memory.jsonl"): true,
		"~/empty.jsonl": false, "~/gone.jsonl": false, home: false,
	} {
		if got := HoldsData(p); got != want {
			t.Errorf("HoldsData(%q) = %v, want %v", p, got, want)
		}
	}
}
