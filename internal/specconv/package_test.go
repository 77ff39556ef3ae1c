package specconv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

func TestPackageSpec(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(filepath.Join(base, "mcpbox.yaml"), []byte(`version: 1
servers:
  mem: {command: [npx, -y, "@modelcontextprotocol/server-memory"], env: {A: b}}
  fetch: {package: "pypi:mcp-server-fetch@1.0", args: [--x], network: {egress: [{host: example.com}]}}
  plain: {command: [node, s.js]}
`))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "packages", "npm", "x")
	o := Options{Base: base, StateDir: state, Packages: map[string]Package{
		"mem":   {Dir: dir, Args: []string{"node", PackageTarget + "/node_modules/m/dist/index.js"}},
		"fetch": {Dir: dir + "py", Args: []string{"python3", PackageTarget + "/site/bin/f", "--x"}, Env: []string{"PYTHONPATH=" + PackageTarget + "/site"}},
	}}
	spec, err := Server(c, c.Server("mem"), o)
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Mount{Source: dir, Target: PackageTarget, Exec: true, Internal: true}
	if !slices.Equal(spec.Args, o.Packages["mem"].Args) || !slices.Contains(spec.Mounts, want) || !slices.Contains(spec.Env, "A=b") {
		t.Errorf("mem: args %q mounts %+v env %q", spec.Args, spec.Mounts, spec.Env)
	}
	for _, m := range spec.Mounts {
		if m.Writable {
			t.Errorf("a writable mount: %+v", m)
		}
	}
	if spec.Network.Enabled() {
		t.Errorf("mem: network %+v, want none", spec.Network)
	}
	// The server's own egress still applies, and nothing more.
	spec, err = Server(c, c.Server("fetch"), o)
	if err != nil || len(spec.Network.Rules) != 1 || spec.Network.Rules[0].Host != "example.com" || !slices.Contains(spec.Env, "PYTHONPATH=/opt/mcpbox/pkg/site") {
		t.Errorf("fetch: %v %+v %q", err, spec.Network.Rules, spec.Env)
	}
	// Other servers are untouched; a package server not installed is refused.
	if spec, err := Server(c, c.Server("plain"), o); err != nil || !slices.Equal(spec.Args, []string{"node", "s.js"}) {
		t.Errorf("plain: %v %q", err, spec.Args)
	}
	delete(o.Packages, "fetch")
	if _, err := Server(c, c.Server("fetch"), o); err == nil || !strings.Contains(err.Error(), "server fetch: package pypi:mcp-server-fetch@1.0 is not installed") {
		t.Errorf("fetch not installed: %v", err)
	}
}
