package launch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

// TestRootsLeaveOutMcpboxMounts: a server's roots are the user's
// directory mounts, never mcpbox's own nor a mounted file. A filesystem
// server given /opt/mcpbox/pkg as a root listed and served its own
// node_modules; the built-in server and a group's supervisor would have
// been given mcpbox's binary.
func TestRootsLeaveOutMcpboxMounts(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"state", "data", "out"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "settings.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(filepath.Join(base, "mcpbox.yaml"), []byte(`version: 1
servers:
  fs:
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", /data/somedir]
    filesystem: {mounts: [{source: data, target: /data/somedir, mode: ro}, {source: settings.json, target: /data/settings.json, mode: ro}], output: {source: out}}
  ws:
    builtin: workspace
    filesystem: {output: {source: out}}
  g1: {command: [x], placement: "group:g", filesystem: {mounts: [{source: data, target: /data/g}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	o := specconv.Options{Base: base, StateDir: filepath.Join(base, "state"), Packages: map[string]specconv.Package{
		"fs": {Dir: filepath.Join(base, "state", "pkg"), Args: []string{"node", specconv.PackageTarget + "/x.js"}},
	}}
	output := gateway.Root{URI: "file:///workspace/output", Name: "output"}
	for _, tc := range []struct {
		name string
		spec func() (sandbox.Spec, error)
		want []gateway.Root
	}{
		{"package", func() (sandbox.Spec, error) { return specconv.Server(c, c.Server("fs"), o) },
			[]gateway.Root{output, {URI: "file:///data/somedir", Name: "somedir"}}},
		{"builtin", func() (sandbox.Spec, error) { return specconv.Server(c, c.Server("ws"), o) },
			[]gateway.Root{output}},
		{"group", func() (sandbox.Spec, error) { return specconv.Group(c, []*config.Server{c.Server("g1")}, o) },
			[]gateway.Root{{URI: "file:///data/g", Name: "g"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := tc.spec()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, roots(&spec)); diff != "" {
				t.Errorf("roots (-want +got):\n%s", diff)
			}
		})
	}
}
