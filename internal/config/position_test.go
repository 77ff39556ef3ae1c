package config

import (
	"fmt"
	"strings"
	"testing"
)

// here marks, in a test config, where the error must point; it is taken
// out before the config is parsed.
const here = "«"

// marked returns yaml without the marker and the marker's line and
// column (1-based, in bytes as yaml counts them for ASCII input).
func marked(t *testing.T, yaml string) (string, Pos) {
	t.Helper()
	i := strings.Index(yaml, here)
	if i < 0 || strings.Count(yaml, here) != 1 {
		t.Fatalf("want one %s in the test config:\n%s", here, yaml)
	}
	before := yaml[:i]
	line := strings.Count(before, "\n") + 1
	col := i - strings.LastIndex(before, "\n")
	return before + yaml[i+len(here):], Pos{line, col}
}

// TestErrorsPointAtTheOffendingLine: every kind of config error (YAML
// syntax, unknown key, wrong type, a bad value found in validation, a
// whole block that is not allowed, a block missing a key) names the file,
// the line and column of the offending key or value (not the start of
// the block around it), and the key path.
func TestErrorsPointAtTheOffendingLine(t *testing.T) {
	const head = "version: 1\nservers:\n"
	tests := []struct {
		name string
		yaml string
		path string // the key path the message names
	}{
		{"syntax: key indented too far", head + `  github:
    command: [echo]
    network:
      egress:
        - host: a.com
        - host: b.com
       «ports: [1]
    tools: {allow: ["*"]}
`, "did not find expected key"},
		{"syntax: key indented too little", head + `  github:
    command: [echo]
    env:
      A: 1
     «B: 2
    tools: {allow: ["*"]}
`, "did not find expected key"},
		{"syntax: mapping in a plain value", head + `  github:
    command: [echo]
    env:
      A: 1
      B: x«: y
`, "mapping values are not allowed"},
		{"unknown key deep in a block", head + `  github:
    command: [echo]
    network:
      egress:
        - host: api.github.com
          ports: [443]
        - host: x.com
          «bogus: 1
`, `unknown key "bogus" in servers.github.network.egress[1]`},
		{"wrong type", head + `  github:
    command: [echo]
    limits:
      memory: 1Gi
      pids: «"many"
`, "servers.github.limits.pids: expected an integer"},
		{"bad value in a list of mappings", head + `  github:
    command: [echo]
    network:
      egress:
        - host: api.github.com
        - {host: «"bad host", ports: [443]}
`, "servers.github.network.egress[1].host: invalid host"},
		{"bad element of a block list", head + `  github:
    command: [echo]
    network:
      egress:
        - host: api.github.com
          ports:
            - 443
            - «70000
`, "servers.github.network.egress[0].ports[1]: 70000 is not a port"},
		{"bad element of a flow list", head + `  github:
    command: [echo]
    exec:
      allow: [/usr/bin/node, «bin/git]
`, "servers.github.exec.allow[1]:"},
		{"a block a group member may not set", head + `  a:
    command: [echo]
    placement: group:g
  b:
    command: [echo]
    placement: group:g
    «network:
      egress:
        - host: a.com
`, "servers.b.network: the servers of group g share one sandbox"},
		{"a block a remote server takes none of", head + `  r:
    url: https://example.com/mcp
    «filesystem:
      tmp: {size: 1Gi}
`, "servers.r.filesystem: does not apply to a remote server"},
		{"a block missing a key", head + `  s:
    command: [echo]
    «artifacts:
      include: ["*.txt"]
`, "servers.s.artifacts.dir: missing host dir"},
		{"a glob of the built-in's commands", head + `  w:
    builtin: workspace
    commands:
      allow: [git, «"[", ls]
`, "servers.w.commands.allow[1]: bad glob"},
		{"a key that only one kind of server takes", head + `  s:
    command: [echo]
    «commands:
      allow: [git]
`, "servers.s.commands: only the built-in workspace server takes commands"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml, at := marked(t, tt.yaml)
			_, err := Load("dir/mcpbox.yaml", []byte(yaml))
			es := AsErrors(err)
			if len(es) == 0 {
				t.Fatalf("Load = %v, want an error", err)
			}
			for _, e := range es {
				if strings.Contains(e.Msg, tt.path) {
					if e.File != "dir/mcpbox.yaml" || e.Line != at.Line || e.Col != at.Col {
						line := strings.Split(yaml, "\n")[at.Line-1]
						t.Errorf("%s\nwant it at %d:%d, where the config has\n%s\n%s^", e, at.Line, at.Col, line, strings.Repeat(" ", at.Col-1))
					}
					if want := fmt.Sprintf("dir/mcpbox.yaml:%d:%d: ", at.Line, at.Col); !strings.HasPrefix(e.Error(), want) {
						t.Errorf("%q does not start with %q", e, want)
					}
					return
				}
			}
			t.Errorf("no error names %q:\n%v", tt.path, err)
		})
	}
}
