package importer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"mcpbox/internal/config"
)

// fakePackageOf recognises `npx -y PKG ARGS` only, as pkginstall would.
func fakePackageOf(argv []string) (string, []string, bool, error) {
	if argv[0] != "npx" {
		return "", nil, false, nil
	}
	switch argv[1] {
	case "-c":
		return "", nil, false, errors.New("npx -c runs a shell command")
	case "-p":
		return "", nil, true, nil
	}
	return "npm:" + argv[2] + "@latest", argv[3:], true, nil
}

// renderPackages converts the client file clientJSON, packages
// included (fakePackageOf), and renders it as mcpbox.yaml.
func renderPackages(t *testing.T, clientJSON string) []byte {
	t.Helper()
	cf, err := ParseClientFile("claude.json", []byte(clientJSON))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{})
	out, err := Render(res, "claude.json")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConvertPackages(t *testing.T) {
	out := renderPackages(t, `{"mcpServers": {
  "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/alice/src", "--root=/srv/data", "/home/alice/a.txt", "/home/alice", "/home/alice/.ssh", "/"]},
  "mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"MEMORY_FILE_PATH": "/home/alice/memory.jsonl", "LOG_LEVEL": "info"}},
  "mem2": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
  "sh": {"command": "npx", "args": ["-c", "echo hi"]},
  "plain": {"command": "node", "args": ["/opt/server.js"]},
  "bin": {"command": "npx", "args": ["-p", "some-pkg", "some-bin"]}
}}`)
	c, err := config.Load("mcpbox.yaml", out)
	if err != nil {
		t.Fatal(err)
	}
	fs := c.Server("fs")
	if fs.Package != "npm:@modelcontextprotocol/server-filesystem@latest" || fs.Command != nil ||
		!slices.Equal(fs.Args, []string{"/data/src", "--root=/data/data", "/home/alice/a.txt", "/home/alice", "/home/alice/.ssh", "/"}) {
		t.Errorf("fs: package %q command %q args %q", fs.Package, fs.Command, fs.Args)
	}
	want := []config.Mount{{Source: "/home/alice/src", Target: "/data/src", Mode: "ro"}, {Source: "/srv/data", Target: "/data/data", Mode: "ro"}}
	if len(fs.Filesystem.Mounts) != 2 {
		t.Fatalf("fs mounts: %+v", fs.Filesystem.Mounts)
	}
	for i, m := range fs.Filesystem.Mounts {
		if m.Source != want[i].Source || m.Target != want[i].Target || m.Mode != want[i].Mode {
			t.Errorf("mount %d: %+v, want %+v", i, m, want[i])
		}
	}
	mem := c.Server("mem")
	if mem.Package == "" || len(mem.Env) != 2 || mem.Env[0].Value != "/workspace/output/memory.jsonl" && mem.Env[1].Value != "/workspace/output/memory.jsonl" {
		t.Errorf("mem: %q env %+v", mem.Package, mem.Env)
	}
	// Without MEMORY_FILE_PATH server-memory would write into its own
	// read-only dir: the import points it at the output.
	if mem2 := c.Server("mem2"); len(mem2.Env) != 1 || mem2.Env[0].Name != "MEMORY_FILE_PATH" || mem2.Env[0].Value != "/workspace/output/memory.jsonl" {
		t.Errorf("mem2: env %+v", mem2.Env)
	}
	if sh := c.Server("sh"); sh.Package != "" || sh.Command == nil {
		t.Errorf("sh: %+v", sh)
	}
	if p := c.Server("plain"); p.Package != "" || !slices.Equal(p.Command, []string{"node", "/opt/server.js"}) {
		t.Errorf("plain: %+v", p)
	}
	if b := c.Server("bin"); b.Package != "" || !slices.Equal(b.Command, []string{"npx", "-p", "some-pkg", "some-bin"}) {
		t.Errorf("bin: %+v", b)
	}
	text := string(out)
	// The home and / are not mounted, and say so (nor is .ssh, taken
	// for a file: the mounts are checked above).
	for _, dir := range []string{"/home/alice is not mounted", "/ is not mounted"} {
		if !strings.Contains(text, dir) {
			t.Errorf("no hint %q in:\n%s", dir, text)
		}
	}
	for _, s := range []string{
		"# Was: npx -y @modelcontextprotocol/server-filesystem /home/alice/src",
		"# /home/alice/src is mounted read-only at /data/src",
		`# The sandbox does not see "/home/alice/a.txt"`,
		"# env MEMORY_FILE_PATH was /home/alice/memory.jsonl, now /workspace/output/memory.jsonl",
		"# env MEMORY_FILE_PATH=/workspace/output/memory.jsonl: the package writes beside its code by default, which is read-only here.",
		"# npx -c runs a shell command",
		"# bin read-only with no network (it stays a command: package: runs a",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("rendered config lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "registry.npmjs.org") {
		t.Errorf("a package server still gets the registry egress hint:\n%s", text)
	}
}

// TestPackageNetworkHints: a package server that calls an API (a
// well-known package's host, or a URL in its env) gets the egress rule
// to allow it, as a comment that loads when uncommented; others none.
func TestPackageNetworkHints(t *testing.T) {
	out := renderPackages(t, `{"mcpServers": {
  "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_0123456789abcdefghijABCDEFGHIJ012345"}},
  "gitlab": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-gitlab"], "env": {"GITLAB_API_URL": "https://git.example.com/api/v4"}},
  "mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
}}`)
	text := string(out)
	for _, s := range []string{
		"# The sandbox has no network, and this server calls api.github.com.",
		"# network: {egress: [{host: api.github.com}]}",
		"# network: {egress: [{host: git.example.com}]}", // the env's URL, not gitlab.com
	} {
		if !strings.Contains(text, s) {
			t.Errorf("rendered config lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "gitlab.com") || strings.Count(text, "# network:") != 2 {
		t.Errorf("want exactly the github and git.example.com rules:\n%s", text)
	}
	checkUncomment(t, text, "network: {egress: [{host: api.github.com}]}")
}

// TestMovedHostFileNoted: a server's data file (MEMORY_FILE_PATH) that
// holds data is named in the notes, with where to copy it: the server
// starts with an empty one in its output. One without data is not.
func TestMovedHostFileNoted(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"mem":   map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-memory"}, "env": map[string]string{"MEMORY_FILE_PATH": "~/memory.jsonl"}},
		"empty": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-memory"}, "env": map[string]string{"MEMORY_FILE_PATH": "/srv/empty.jsonl"}},
	}})
	cf, err := ParseClientFile("claude.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	var asked []string
	ConvertPackages(res, fakePackageOf, Host{HoldsData: func(p string) bool {
		asked = append(asked, p)
		return p == "~/memory.jsonl"
	}})
	notes := strings.Join(res.Notes, "\n")
	want := `server "mem": ~/memory.jsonl (env MEMORY_FILE_PATH) holds data the sandboxed server will not see`
	if !strings.Contains(notes, want) || !strings.Contains(notes, "workspaces/AGENT/mem/output") {
		t.Errorf("notes %q lack %q", notes, want)
	}
	if strings.Contains(notes, `"empty"`) {
		t.Errorf("notes name a file without data: %q", notes)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"/srv/empty.jsonl", "~/memory.jsonl"}) {
		t.Errorf("asked about %q", asked)
	}
}

// TestPackageHostPathsNoted: the note about host paths names only what
// the converted package server still cannot see: not a directory it got
// mounted at /data, but a file argument; a runner command that stays a
// command (refused) is noted with all its paths.
func TestPackageHostPathsNoted(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs":    map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/proj/docs"}},
		"file":  map[string]any{"command": "npx", "args": []string{"-y", "some-server", "/home/me/notes.txt"}},
		"shell": map[string]any{"command": "npx", "args": []string{"-c", "/home/me/site/run.sh"}},
	}})
	cf, err := ParseClientFile("claude.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{})
	notes := strings.Join(res.Notes, "\n")
	if strings.Contains(notes, "/home/me/proj/docs") {
		t.Errorf("a mounted directory is noted as unseen:\n%s", notes)
	}
	for _, want := range []string{`server "file" names host paths its sandbox does not see ("/home/me/notes.txt")`, `server "shell" names host paths`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// TestPackageRelativeAndHomeArgs: a relative path in a package server's
// arguments (a Cursor project's "server-filesystem .") is named, in the
// config and in a note, since the sandbox resolves it elsewhere; the
// bare home "~" is not mounted, and says why.
func TestPackageRelativeAndHomeArgs(t *testing.T) {
	cf, err := ParseClientFile("mcp.json", []byte(`{"mcpServers": {
  "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", ".", "--dir=../docs", "~", "notapath"]}
}}`))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{})
	out, err := Render(res, "mcp.json")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, s := range []string{
		"# . is a relative path: the client resolved it against its own working directory",
		"# ../docs is a relative path",
		"# ~ is not mounted: ",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("rendered config lacks %q:\n%s", s, text)
		}
	}
	note := strings.Join(res.Notes, "\n")
	if !strings.Contains(note, `server "fs": ".", "../docs": relative paths`) || strings.Contains(note, "notapath") {
		t.Errorf("notes: %q", res.Notes)
	}
	if c, err := config.Load("mcpbox.yaml", out); err != nil || len(c.Server("fs").Filesystem.Mounts) != 0 {
		t.Errorf("the config: %v; want no mounts", err)
	}
}

// TestDottedDirMounted: an argument whose name has a dot is mounted when
// the host says it is a directory (a checkout named my.repo); it was
// taken for a file and left unseen. A file with a dot is not.
func TestDottedDirMounted(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", "/x/my.repo", "/x/notes.txt"}},
	}})
	cf, err := ParseClientFile("cursor.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{IsDir: func(p string) bool { return p == "/x/my.repo" }})
	fs := res.Config.Server("fs")
	if !slices.Equal(fs.Args, []string{"/data/my-repo", "/x/notes.txt"}) ||
		len(fs.Filesystem.Mounts) != 1 || fs.Filesystem.Mounts[0].Source != "/x/my.repo" {
		t.Errorf("args %q, mounts %+v; want /x/my.repo mounted at /data/my-repo and the file left", fs.Args, fs.Filesystem.Mounts)
	}
}

// TestMissingDirNoted: a directory a client names that does not exist
// here is mounted all the same (the config is the user's to finish), and
// a note says serve cannot start the server until it does; it used to
// surface only as the first session's failure.
func TestMissingDirNoted(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", "/x/in", "/x/out"}},
	}})
	cf, err := ParseClientFile("claude_desktop_config.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{IsDir: func(p string) bool { return p == "/x/in" }})
	if fs := res.Config.Server("fs"); len(fs.Filesystem.Mounts) != 2 {
		t.Fatalf("mounts %+v; want both dirs mounted", fs.Filesystem.Mounts)
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, `server "fs" mounts /x/out, which does not exist here: serve cannot start the server until it does`) || strings.Contains(notes, "/x/in") {
		t.Errorf("notes: %q; want /x/out named as missing, /x/in not", notes)
	}
}

// TestBinFormMountsDirs: `npx -p PKG BIN DIR` stays a command (the named
// bin), and its host directory is mounted and rewritten as a package
// server's is; it was left as written, unseen by the sandbox.
func TestBinFormMountsDirs(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"multi": map[string]any{"command": "npx", "args": []string{"-p", "@s/multi", "beta", "/x/docs", "/x/a.txt"}},
	}})
	cf, err := ParseClientFile("cursor.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{})
	s := res.Config.Server("multi")
	if !slices.Equal(s.Command, []string{"npx", "-p", "@s/multi", "beta", "/data/docs", "/x/a.txt"}) ||
		len(s.Filesystem.Mounts) != 1 || s.Filesystem.Mounts[0].Source != "/x/docs" || s.Filesystem.Mounts[0].Target != "/data/docs" {
		t.Errorf("command %q, mounts %+v; want /x/docs mounted at /data/docs", s.Command, s.Filesystem.Mounts)
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, `"/x/a.txt"`) || strings.Contains(notes, "/x/docs") {
		t.Errorf("notes: %q; want the file named as unseen, not the mounted dir", notes)
	}
}

// TestLoopbackServicesForwarded: a server that reaches a service on this
// machine (a database on localhost, in its args or env) is told that its
// sandbox's localhost is its own, with the network.forward to uncomment,
// and gets no egress rule for localhost; a remote host is no forward.
func TestLoopbackServicesForwarded(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"pg":  map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-postgres", "postgresql://alice:pw@localhost/db"}},
		"api": map[string]any{"command": "my-server", "args": []string{"--redis=redis://127.0.0.1:6380/0"}, "env": map[string]any{"API_URL": "http://[::1]:8080/v1", "REMOTE": "https://db.example.com:5432"}},
	}})
	cf, err := ParseClientFile("claude_desktop_config.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{})
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{
		`server "pg" reaches 127.0.0.1:5432 on this machine, but in its sandbox localhost is its own`,
		`server "api" reaches 127.0.0.1:6380, [::1]:8080 on this machine`,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes without %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "db.example.com") {
		t.Errorf("a remote host named as on this machine:\n%s", notes)
	}
	for name, want := range map[string]string{
		"pg":  `network: {forward: [{listen: "127.0.0.1:5432", to: "127.0.0.1:5432"}]}`,
		"api": `network: {forward: [{listen: "127.0.0.1:6380", to: "127.0.0.1:6380"}, {listen: "[::1]:8080", to: "[::1]:8080"}]}`,
	} {
		hints := strings.Join(res.Hints[name], "\n")
		if !strings.Contains(hints, want) || strings.Contains(hints, "{host: localhost}") {
			t.Errorf("server %s hints:\n%s\nwant %q", name, hints, want)
		}
	}
}

// TestHomeVariablesAreHostPaths: ${HOME} (Claude Code), $HOME and VS
// Code's ${userHome} and ${env:HOME} at the start of an env value or an
// argument are the home directory, which the client expands and mcpbox
// would not: a data file moves into the output, a directory is mounted.
func TestHomeVariablesAreHostPaths(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"mem": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-memory"},
			"env": map[string]string{"MEMORY_FILE_PATH": "${HOME}/mem.json"}},
		"fs": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", "${userHome}/notes", "--root=$HOME/docs"}},
	}})
	cf, err := ParseClientFile("mcp.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{IsDir: func(string) bool { return true }})
	for _, s := range res.Config.Servers {
		switch s.Name {
		case "mem":
			if len(s.Env) != 1 || s.Env[0].Value != "/workspace/output/mem.json" {
				t.Errorf("mem's env %+v, want MEMORY_FILE_PATH in its output", s.Env)
			}
		case "fs":
			var sources []string
			for _, m := range s.Filesystem.Mounts {
				sources = append(sources, m.Source)
			}
			if !slices.Equal(sources, []string{"~/notes", "~/docs"}) || slices.ContainsFunc(s.Args, func(a string) bool { return strings.Contains(a, "HOME") || strings.Contains(a, "userHome") }) {
				t.Errorf("fs mounts %q, args %q; want both home dirs mounted and no variable left", sources, s.Args)
			}
		}
	}
	if notes := strings.Join(res.Notes, "\n"); strings.Contains(notes, "passes on literally") {
		t.Errorf("notes %q", notes)
	}
}

// TestPackageKeepsProject: a project's npx server, made a package
// server, still says which ~/.claude.json project it came from.
func TestPackageKeepsProject(t *testing.T) {
	cf, err := ParseClientFile("claude.json", []byte(`{"projects": {"/p": {"mcpServers": {
		"mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
		"sub": {"command": "npx", "args": ["-p", "pkg", "bin"]}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cf.UseProject("/p"); err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	ConvertPackages(res, fakePackageOf, Host{})
	for _, name := range []string{"mem", "sub"} {
		if h := res.Hints[name]; len(h) < 2 || h[0] != "From the project /p." {
			t.Errorf("hints of %s: %q, want the project first", name, h)
		}
	}
}
