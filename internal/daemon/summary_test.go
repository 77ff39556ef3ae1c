package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
)

// TestSummaryWarnsUnreadableSecrets: serve's start-up summary names each
// env: or file: secret (and header) that cannot be read now, where it is
// written, with no value; readable ones, cmd: references (not run) and
// a config without secrets add nothing.
func TestSummaryWarnsUnreadableSecrets(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "tok")
	if err := os.WriteFile(good, []byte("file-secret-value-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("T6_SET", "env-secret-value-1")
	t.Setenv("T6_SHORT", "abc")
	os.Unsetenv("T6_UNSET")
	src := `version: 1
servers:
  gh:
    command: [sh]
    secrets:
      A: {from: env:T6_UNSET}
      B: {from: "file:` + good + `"}
      C: {from: "file:` + filepath.Join(dir, "missing") + `"}
      D: {from: env:T6_SHORT}
      E: {from: "cmd:false"}
      F: {from: env:T6_SET}
    tools: {allow: ["*"]}
  docs:
    url: https://docs.example.com/mcp
    headers: {Authorization: {from: env:T6_UNSET}}
    tools: {allow: ["*"]}
`
	c, err := config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range summarize(c, filepath.Join(dir, "mcpbox.lock")).Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		":6:7: servers.gh.secrets.A: secret from env:T6_UNSET: the variable is not set: server gh cannot start",
		":8:7: servers.gh.secrets.C: secret from file: open " + filepath.Join(dir, "missing") + ": no such file",
		":9:7: servers.gh.secrets.D: secret from env is shorter than 8 bytes",
		":15:15: servers.docs.headers.Authorization: secret from env:T6_UNSET: the variable is not set: server docs cannot start",
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d: %q, want it to contain %q", i, got[i], w)
		}
		if strings.Contains(got[i], "abc") {
			t.Errorf("warning %d shows a value: %q", i, got[i])
		}
	}
	c, err = config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte("version: 1\nservers:\n  x:\n    command: [sh]\n    tools: {allow: [\"*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ws := summarize(c, filepath.Join(dir, "mcpbox.lock")).Warnings; len(ws) != 0 {
		t.Errorf("a config without secrets: warnings %v", ws)
	}
}

// TestSummaryWarnsMissingCommand: a local server whose program the
// sandbox cannot find (a typo, a tool not installed) is named at start;
// programs that are there, package runners, images, a PATH of the
// server's own and paths into mounts are not.
func TestSummaryWarnsMissingCommand(t *testing.T) {
	dir := t.TempDir()
	src := `version: 1
servers:
  typo:
    command: [mcp-server-doesnotexist-t6, --stdio]
    tools: {allow: ["*"]}
  gone:
    command: [/usr/bin/mcp-server-doesnotexist-t6]
    tools: {allow: ["*"]}
  shell:
    command: [sh, -c, "exit 0"]
    tools: {allow: ["*"]}
  abs:
    command: [/bin/sh]
    tools: {allow: ["*"]}
  npx:
    command: [npx, -y, "@modelcontextprotocol/server-memory"]
    tools: {allow: ["*"]}
  mounted:
    command: [/opt/tools/server]
    tools: {allow: ["*"]}
  ownpath:
    command: [my-server]
    env: {PATH: /opt/tools}
    tools: {allow: ["*"]}
`
	c, err := config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range summarize(c, filepath.Join(dir, "mcpbox.lock")).Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		":4:14: servers.typo.command: mcp-server-doesnotexist-t6 is in none of the sandbox's PATH directories",
		":7:14: servers.gone.command: /usr/bin/mcp-server-doesnotexist-t6 does not exist on the host",
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d: %q, want it to contain %q", i, got[i], w)
		}
	}
}
