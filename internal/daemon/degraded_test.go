package daemon

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

// TestAcceptDegraded: serve --allow-degraded=cgroups is sandbox.require
// without cgroups for every local server, whatever the config required.
func TestAcceptDegraded(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
sandbox: {require: [seccomp, cgroups]}
servers:
  a: {command: [x]}
  b: {command: [y], sandbox: {require: [landlock, cgroups, idmap]}}
  r: {url: "https://example.com/mcp"}
`))
	if err != nil {
		t.Fatal(err)
	}
	AcceptDegraded(c, false, []sandbox.Layer{sandbox.LayerCgroups, sandbox.LayerIdmap})
	got := map[string][]string{}
	for _, s := range c.Servers {
		got[s.Name] = c.RequiredLayers(s)
	}
	want := map[string][]string{"a": {"seccomp"}, "b": {"landlock"}, "r": {"seccomp", "cgroups"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("required layers (-want +got):\n%s", diff)
	}
	AcceptDegraded(c, true, nil)
	if got := c.RequiredLayers(c.Servers[0]); len(got) != 0 {
		t.Errorf("bare --allow-degraded: server a still requires %v", got)
	}
}
