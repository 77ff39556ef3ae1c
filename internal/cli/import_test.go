package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func runImport(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb}
	code := e.importConfig(args)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportCommand runs the whole command on a small file: the YAML on
// stdout, the notes and variables on stderr, from a file and from stdin.
func TestImportCommand(t *testing.T) {
	in := `{"mcpServers": {"Brave Search": {"command": "uvx", "args": ["mcp-server-brave-search"], "env": {"BRAVE_API_KEY": "BSAq9x8c7v6b5n4m3k2j1h0gFAKE"}}}}`
	for _, args := range [][]string{{writeFile(t, "client.json", in)}, {"-"}} {
		code, out, errs := runImport(in, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\nstderr: %s", args, code, errs)
		}
		for _, s := range []string{"# mcpbox.yaml imported by 'mcpbox import' from ", "brave-search:", "from: env:BRAVE_API_KEY"} {
			if !strings.Contains(out, s) {
				t.Errorf("%v: stdout lacks %q:\n%s", args, s, out)
			}
		}
		for _, s := range []string{
			`mcpbox: import: server "Brave Search" is called brave-search in mcpbox.yaml`,
			"mcpbox: import: set these variables in the environment of mcpbox serve:\n  BRAVE_API_KEY\tservers.brave-search.secrets.BRAVE_API_KEY\n",
		} {
			if !strings.Contains(errs, s) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, s, errs)
			}
		}
		if strings.Contains(out+errs, "BSAq9x8c7v6b5n4m3k2j1h0gFAKE") {
			t.Errorf("%v: credential copied to the output", args)
		}
	}
}

// TestImportProtectsHome: the user's home, wherever it is, and its
// credential dirs are not mounted into an imported server, whether an
// argument or a docker volume names them; a project dir in it is.
func TestImportProtectsHome(t *testing.T) {
	real := filepath.Join(t.TempDir(), "odd", "alice")
	for _, d := range []string{".ssh", ".aws", "project"} {
		if err := os.MkdirAll(filepath.Join(real, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(t.TempDir(), "alice") // $HOME is a link: a picker names the real path
	if err := os.Symlink(real, home); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	in, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs":   map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", home + "/.ssh", home, home + "/project"}},
		"aws":  map[string]any{"command": "docker", "args": []string{"run", "-i", "--rm", "-v", real + "/.aws:/root/.aws:ro", "mcp/aws"}},
		"home": map[string]any{"command": "docker", "args": []string{"run", "-i", "--rm", "-v", home + ":/h", "mcp/x"}},
	}})
	code, out, errs := runImport("", writeFile(t, "client.json", string(in)))
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, errs)
	}
	for _, bad := range []string{"source: " + home + "/.ssh", "source: " + real + "/.aws", "source: " + home + "\n"} {
		if strings.Contains(out, bad) {
			t.Errorf("the import mounts %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "source: "+home+"/project") {
		t.Errorf("the project dir in the home is not mounted:\n%s", out)
	}
	if !strings.Contains(out+errs, home+"/.ssh is not mounted") || !strings.Contains(out+errs, real+"/.aws:/root/.aws:ro left out") {
		t.Errorf("no note says why the credential dirs are left out:\n%s\n%s", out, errs)
	}
}

// TestImportRewriteFlags: --config is made absolute (~/ expanded),
// --mcpbox defaults to this binary, and flags after FILE still count.
func TestImportRewriteFlags(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(wd, "conf", "mcpbox.yaml")
	type entry struct {
		Type    string   `json:"type,omitempty"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	tests := []struct {
		name   string
		input  string
		flags  []string
		want   map[string]map[string]entry // server key -> its entries
		stderr string
	}{
		{
			name:  "relative config",
			input: `{"x": 1, "mcpServers": {"a": {"command": "a"}}}`,
			flags: []string{"--rewrite-client-config", "--config", "conf/mcpbox.yaml", "--mcpbox", "/opt/mcpbox/mcpbox"},
			want:  map[string]map[string]entry{"mcpServers": {"mcpbox": {Command: "/opt/mcpbox/mcpbox", Args: []string{"serve", "--config", abs, "--stdio"}}}},
		},
		{
			name:  "vscode default binary",
			input: `{"servers": {"a": {"command": "a"}}}`,
			flags: []string{"--config=" + abs, "--rewrite-client-config"},
			want:  map[string]map[string]entry{"servers": {"mcpbox": {Type: "stdio", Command: self, Args: []string{"serve", "--config", abs, "--stdio"}}}},
		},
		{
			name:  "home-relative config",
			input: `{"mcpServers": {"a": {"command": "a"}}}`,
			flags: []string{"--config=~/m.yaml", "--rewrite-client-config", "--mcpbox", "mcpbox"},
			want:  map[string]map[string]entry{"mcpServers": {"mcpbox": {Command: "mcpbox", Args: []string{"serve", "--config", filepath.Join(home, "m.yaml"), "--stdio"}}}},
		},
		{
			name:   "claude code state file",
			input:  `{"numStartups": 3, "mcpServers": {"a": {"command": "a", "env": {"API_TOKEN": "t"}}}, "projects": {"/p": {"mcpServers": {"b": {"command": "b"}}}}}`,
			flags:  []string{"--rewrite-client-config", "--config", abs, "--mcpbox", "mcpbox"},
			want:   map[string]map[string]entry{"mcpServers": {"mcpbox": {Command: "mcpbox", Args: []string{"serve", "--config", abs, "--stdio"}}}},
			stderr: "holds the client's state besides servers: merge this mcpServers object into it (or a project's .mcp.json) by hand, removing the servers it replaces\nmcpbox: import: set these variables in the environment of mcpbox serve (for the client's \"mcpbox\" entry: its \"env\"):\n  API_TOKEN\t",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// FILE comes first: flags after it must still count.
			args := append([]string{writeFile(t, "client.json", tt.input)}, tt.flags...)
			code, out, errs := runImport("", args...)
			if code != 0 {
				t.Fatalf("exit %d\nstderr: %s", code, errs)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is no JSON object: %v\n%s", err, out)
			}
			servers := map[string]map[string]entry{}
			for k, v := range got {
				if k == "mcpServers" || k == "servers" {
					var es map[string]entry
					if err := json.Unmarshal(v, &es); err != nil {
						t.Fatal(err)
					}
					servers[k] = es
				}
			}
			if diff := cmp.Diff(tt.want, servers); diff != "" {
				t.Errorf("servers (-want +got):\n%s\n%s", diff, out)
			}
			if !strings.Contains(errs, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, errs)
			}
		})
	}
}
func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		input  string // written to a file unless empty
		args   []string
		code   int
		stderr []string
	}{
		{name: "no file", code: exitUsage, stderr: []string{"want exactly one FILE"}},
		{name: "two files", args: []string{"a.json", "b.json"}, code: exitUsage, stderr: []string{"got 2"}},
		{name: "missing", args: []string{filepath.Join(dir, "nope.json")}, code: exitUsage, stderr: []string{"reading client config", "nope.json"}},
		{name: "bad flag", args: []string{"--nope"}, code: exitUsage, stderr: []string{"flag provided but not defined"}},
		{name: "syntax", input: "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\" \"args\": []}\n  }\n}", code: exitUsage, stderr: []string{"client.json:3:26: invalid JSON"}},
		{name: "truncated", input: `{"mcpServers": {`, code: exitUsage, stderr: []string{"invalid JSON", "unexpected end"}},
		{name: "emptied by a redirect", args: []string{writeFile(t, "emptied.json", "")}, code: exitUsage, stderr: []string{"emptied.json is empty", "the shell emptied it"}},
		{name: "array", input: `[{"command": "x"}]`, code: exitUsage, stderr: []string{"want a JSON object"}},
		{name: "empty servers", input: `{"mcpServers": {}}`, code: exitUsage, stderr: []string{"no MCP servers found"}},
		{name: "other json", input: `{"editor.fontSize": 12}`, code: exitUsage, stderr: []string{"no MCP servers found"}},
		{name: "servers not object", input: `{"mcpServers": ["x"]}`, code: exitUsage, stderr: []string{"mcpServers: want a JSON object"}},
		{name: "nothing importable", input: `{"mcpServers": {"a": {"url": "http://example.com/mcp"}, "b": {"args": ["x"]}, "c": {"command": "x", "disabled": true}, "d": {"command": 1}}}`,
			code: exitUsage, stderr: []string{`skipping server "a": `, "url", `skipping server "b": has neither`, `"c": disabled`, `skipping server "d": command: got a JSON number, want string`, "no server of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.input != "" {
				args = []string{writeFile(t, "client.json", tt.input)}
			}
			code, out, errs := runImport("", args...)
			if code != tt.code || out != "" {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tt.code, out, errs)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errs)
				}
			}
		})
	}
}

// TestImportNotesPrintable: the notes name what the client file chose (a
// project's key, a path): one with escape sequences (a cloned
// repository's .mcp.json, a ~/.claude.json project) is printed escaped,
// so that it cannot clear the terminal or forge a line of mcpbox's.
func TestImportNotesPrintable(t *testing.T) {
	in := `{"mcpServers": {"dup": {"command": "a"}}, "projects": {"/p\u001b[2J\u001b[H": {"mcpServers": {"dup": {"command": "b"}}}}}`
	code, _, errs := runImport(in, "-")
	if code != 0 || !strings.Contains(errs, `project /p\x1b[2J\x1b[H has servers of its own`) || strings.ContainsRune(errs, 0x1b) {
		t.Errorf("exit %d, stderr %q; want the project's name escaped", code, errs)
	}
	code, _, errs = runImport(in, "-", "--project", "/p\x1b[2J\x1b[H")
	if code != 0 || !strings.Contains(errs, `server "dup" of project /p\x1b[2J\x1b[H replaces the user's`) || strings.ContainsRune(errs, 0x1b) {
		t.Errorf("exit %d, stderr %q; want the project's name escaped", code, errs)
	}
	// A path with a line break in it cannot start a line of its own.
	in = `{"mcpServers": {"b": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/nonexistent-mcpbox\nmcpbox: import: all good"]}}}`
	code, _, errs = runImport(in, "-")
	if code != 0 || !strings.Contains(errs, `/nonexistent-mcpbox\nmcpbox: import: all good, which does not exist here`) || strings.Contains(errs, "\nmcpbox: import: all good") {
		t.Errorf("exit %d, stderr %q; want the path's line break escaped", code, errs)
	}
}

// TestImportProject: --project DIR, relative to the current directory,
// adds that ~/.claude.json project's servers; an unknown one is a usage
// error naming the projects there are.
func TestImportProject(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	in := `{"mcpServers": {"user": {"command": "u"}}, "projects": {` +
		strconv.Quote(dir) + `: {"mcpServers": {"here": {"command": "h"}}}, "/elsewhere": {"mcpServers": {"there": {"command": "t"}}}}}`
	code, out, errs := runImport(in, "-", "--project", ".")
	if code != 0 || !strings.Contains(out, "  user:\n") || !strings.Contains(out, "  here:\n") || strings.Contains(out, "there:") {
		t.Errorf("--project .: exit %d, want the servers user and here only\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(errs, "project /elsewhere has servers of its own") {
		t.Errorf("no note of the project left out:\n%s", errs)
	}
	// Through a link to the project's dir: its target is the key.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runImport(in, "-", "--project", link); code != 0 || !strings.Contains(out, "  here:\n") {
		t.Errorf("--project LINK: exit %d, want the project's servers\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if code, _, errs := runImport(in, "-", "--project", ".", "--project", "/elsewhere"); code != exitUsage || !strings.Contains(errs, "one --project at most") {
		t.Errorf("--project twice: exit %d, stderr %s", code, errs)
	}
	code, out, errs = runImport(in, "-", "--project", "/nowhere")
	if code != exitUsage || out != "" || !strings.Contains(errs, "has no project /nowhere with servers (it has: "+dir+", /elsewhere)") {
		t.Errorf("--project /nowhere: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}
