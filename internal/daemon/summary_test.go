package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/dashboard"
	"mcpbox/internal/image"
	"mcpbox/internal/integrity"
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
	// A named pipe (a password manager's) is looked up, not opened: an
	// open would block until some program writes it, and a read would
	// take the value the server's start needs.
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
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
      G: {from: "file:` + fifo + `"}
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
	for _, w := range summarize(c, filepath.Join(dir, "mcpbox.lock"), dir).Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		":6:7: servers.gh.secrets.A: secret from env:T6_UNSET: the variable is not set: server gh cannot start until serve is started again with the variable set",
		":8:7: servers.gh.secrets.C: secret from file: open " + filepath.Join(dir, "missing") + ": no such file",
		":9:7: servers.gh.secrets.D: secret from env:T6_SHORT is shorter than 8 bytes: redaction by value would hit ordinary text: server gh cannot start until serve is started again with a usable value in it",
		":16:15: servers.docs.headers.Authorization: secret from env:T6_UNSET: the variable is not set: server docs cannot start",
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
	if ws := summarize(c, filepath.Join(dir, "mcpbox.lock"), dir).Warnings; len(ws) != 0 {
		t.Errorf("a config without secrets: warnings %v", ws)
	}
}

// TestSummaryWarnsMissingCommand: a local server whose program the
// sandbox cannot find (a typo, a tool not installed) is named at start;
// programs that are there, package runners, images, a PATH of the
// server's own and paths into mounts are not. A host path the sandbox
// does not show (a script in the project, outside every mount) is.
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
    filesystem: {mounts: [{source: ` + dir + `, target: /opt/tools}]}
    tools: {allow: ["*"]}
  inworkspace:
    command: [/workspace/input/server.sh]
    tools: {allow: ["*"]}
  hostonly:
    command: [` + dir + `/server.sh]
    tools: {allow: ["*"]}
  ownpath:
    command: [my-server]
    env: {PATH: /opt/tools}
    tools: {allow: ["*"]}
  fsdocs:
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", ` + dir + `, /workspace/input, /nonexistent-t6]
    tools: {allow: ["*"]}
  pkgarg:
    package: npm:some-server@1.0.0
    args: ["--root=` + dir + `", /usr/share]
    tools: {allow: ["*"]}
  mountedarg:
    command: [/bin/sh, /var/lib/x.sh, /var/lib]
    filesystem: {mounts: [{source: ` + dir + `, target: /var/lib}]}
    tools: {allow: ["*"]}
`
	c, err := config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings(t, summarize(c, filepath.Join(dir, "mcpbox.lock"), dir).Warnings, []string{
		":4:14: servers.typo.command: mcp-server-doesnotexist-t6 is in none of the sandbox's PATH directories",
		":7:14: servers.gone.command: /usr/bin/mcp-server-doesnotexist-t6 does not exist on the host",
		":26:14: servers.hostonly.command: " + dir + "/server.sh is a host path the sandbox does not show",
		":33:14: servers.fsdocs.command: " + dir + ": host paths the sandbox does not show",
		":37:11: servers.pkgarg.args: " + dir + ": host paths the sandbox does not show",
	})
}

// TestSummaryWarnsNodeIgnoresProxy: a Node server (npx, an npm package,
// node itself) whose egress allows a port above 1023 is warned about, at
// its egress key, when the host's Node ignores proxy variables (it gets
// there by name on ports below 1024 only); a Python one, one without
// egress, one with low ports only and a newer Node are not. The host's
// own node is asked for real.
func TestSummaryWarnsNodeIgnoresProxy(t *testing.T) {
	src := `version: 1
servers:
  fetcher:
    command: [npx, -y, "@scope/fetcher"]
    network:
      egress: [{host: api.example.com, ports: [443, 9000]}, {host: b.example.com, ports: [8443, 9000]}]
    tools: {allow: ["*"]}
  pkg:
    package: npm:other-server
    network: {egress: [{host: api.example.com, ports: [8080]}]}
    tools: {allow: ["*"]}
  plain:
    command: [node, /opt/s.js]
    network: {egress: [{host: api.example.com, ports: [1024]}]}
    tools: {allow: ["*"]}
  lowports:
    command: [npx, -y, "@scope/web"]
    network: {egress: [{host: api.example.com}, {host: git.example.com, ports: [22, 1023]}]}
    tools: {allow: ["*"]}
  offline:
    command: [npx, -y, offline-server]
    tools: {allow: ["*"]}
  py:
    command: [uvx, py-server]
    network: {egress: [{host: api.example.com, ports: [8443]}]}
    tools: {allow: ["*"]}
`
	c, err := config.Load("mcpbox.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ws := nodeProxyWarnings(c, func() string { return "v20.20.2" })
	var got []string
	for _, w := range ws {
		got = append(got, strings.SplitN(w.Msg, ":", 2)[0])
		if !strings.Contains(w.Msg, "Node v20.20.2") || !strings.Contains(w.Msg, "ECONNREFUSED") {
			t.Errorf("warning %q: want the version and the symptom", w.Msg)
		}
	}
	if want := "servers.fetcher.network.egress servers.pkg.network.egress servers.plain.network.egress"; strings.Join(got, " ") != want {
		t.Errorf("warned about %q, want %q", got, want)
	}
	if len(ws) > 0 && ws[0].Line != 6 {
		t.Errorf("the fetcher warning is at line %d, want 6 (its egress)", ws[0].Line)
	}
	if len(ws) > 0 && !strings.Contains(ws[0].Msg, "to ports 8443, 9000 fail") {
		t.Errorf("the fetcher warning %q does not name its high ports", ws[0].Msg)
	}
	for _, v := range []string{"v22.21.0", "v24.1.0", "v25.0.0", "garbage"} {
		if ws := nodeProxyWarnings(c, func() string { return v }); len(ws) != 0 {
			t.Errorf("Node %s: warnings %v, want none", v, ws)
		}
	}
	for _, v := range []string{"v18.19.0", "v22.20.0", "v23.11.0"} {
		if ws := nodeProxyWarnings(c, func() string { return v }); len(ws) != 3 {
			t.Errorf("Node %s: %d warnings, want 3", v, len(ws))
		}
	}
	// The host's node, asked for real: a version string when it has one.
	if v := hostNodeVersion(); v != "" && !strings.HasPrefix(v, "v") {
		t.Errorf("hostNodeVersion = %q", v)
	}
}

// TestSummaryWarnsUnmaskableInject: an env: secret added at the proxy
// whose value is too short for a placeholder (a start would refuse it)
// is flagged, without its value; one long enough is
// not.
func TestSummaryWarnsUnmaskableInject(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("T7_SHORT", "s3cr3tABCDEF")
	t.Setenv("T7_LONG", "tok_Zq8Lm2Xv9Rt4Wp7Ks3Nd")
	src := `version: 1
servers:
  gh:
    command: [sh]
    secrets:
      S: {from: env:T7_SHORT, inject: {hosts: [api.example.com], header: Authorization}}
      L: {from: env:T7_LONG, inject: {hosts: [api.example.com], header: X-Key}}
    network: {egress: [{host: api.example.com, ports: [443]}]}
    tools: {allow: ["*"]}
`
	c, err := config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ws := EnvWarnings(c)
	if len(ws) != 1 || !strings.Contains(ws[0].Error(), "servers.gh.secrets.S.inject: env:T7_SHORT: value too short to mask") {
		t.Fatalf("warnings: %v, want one for S", ws)
	}
	if msg := ws[0].Error(); strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "ABCDEF") {
		t.Errorf("the warning shows the value: %s", msg)
	}
}

// TestSummaryBuiltinPinningOff: the start-up line says what the guard
// does: a built-in server without a pin is not pinned (its tools change
// only with mcpbox), so it reads "pinning off", not "not yet pinned".
func TestSummaryBuiltinPinningOff(t *testing.T) {
	dir := t.TempDir()
	c, err := config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte("version: 1\nservers:\n  workspace:\n    builtin: workspace\n    tools: {allow: [\"*\"]}\n  other:\n    command: [sh]\n    tools: {allow: [\"*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	line := summarize(c, filepath.Join(dir, "mcpbox.lock"), dir).Line()
	if !strings.Contains(line, "workspace (pinning off)") || !strings.Contains(line, "other (tools not yet pinned)") {
		t.Errorf("summary line: %q", line)
	}
}

// TestEnvWarningsClientToken: a client token from an unset variable is
// flagged by policy check (serve over HTTP would exit on it), naming the
// reference, not a value; one that is set is not.
func TestEnvWarningsClientToken(t *testing.T) {
	t.Setenv("T8_SET", "tok_Zq8Lm2Xv9Rt4Wp7Ks3Nd")
	src := `version: 1
clients:
  - {name: alice, token: {from: env:T8_SET}}
  - {name: bob, token: {from: env:T8_UNSET_FOR_TEST}}
servers:
  s:
    command: [sh]
    tools: {allow: ["*"]}
`
	c, err := config.Load(filepath.Join(t.TempDir(), "mcpbox.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ws := EnvWarnings(c)
	if len(ws) != 1 || !strings.Contains(ws[0].Error(), "clients[1].token.from: ") || !strings.Contains(ws[0].Error(), "T8_UNSET_FOR_TEST") {
		t.Fatalf("warnings: %v, want one for bob's token", ws)
	}
}

// TestCredentialWarnings: a server that would see one of the home dir's
// credential dirs (by ~/, a relative path, or a link outside the
// project) is named at start and by policy check, with its position; a
// writable one, which serve refuses, too; project dirs are not. Policy
// check warns of a program the sandbox will not find, as serve does.
func TestCredentialWarnings(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, d := range []string{".ssh", ".aws", ".config/gh", "proj/data", "keys-elsewhere", ".password-store", ".work/proj2", "other"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "keys")); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(home, "proj")
	src := `version: 1
servers:
  a:
    command: [sh]
    filesystem:
      input: {source: ~/.ssh}
      output: {source: ../.config/gh}
      mounts:
        - {source: ../.aws, target: /aws}
        - {source: ~/keys, target: /keys}
        - {source: ~/.ssh, target: /rw, mode: rw}
        - {source: data, target: /data}
        - {source: ~/keys-elsewhere, target: /k, mode: rw}
        - {source: ../other, target: /o, mode: rw, git: rw}
        - {source: ~/.password-store, target: /p}
        - {source: ~/.work/proj2, target: /w}
    tools: {allow: ["*"]}
  b:
    command: [no-such-server-bin-7f3a]
    tools: {allow: ["*"]}
`
	cfg := filepath.Join(proj, "mcpbox.yaml")
	c, err := config.Load(cfg, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		":19:14: servers.b.command: no-such-server-bin-7f3a is in none of the sandbox's PATH directories",
		":6:23: servers.a.filesystem.input.source: ~/.ssh shows " + filepath.Join(home, ".ssh") + " to the sandbox: credentials",
		":7:24: servers.a.filesystem.output.source: serve refuses it: " + filepath.Join(home, ".config/gh") + " would let a sandbox write",
		":9:20: servers.a.filesystem.mounts[0].source: ../.aws shows " + filepath.Join(home, ".aws"),
		":10:20: servers.a.filesystem.mounts[1].source: ~/keys shows " + filepath.Join(home, ".ssh"),
		":11:20: servers.a.filesystem.mounts[2].source: serve refuses it: ",
		":14:57: servers.a.filesystem.mounts[5].git: rw lets the server change the .git of the repositories in ../other",
		":15:20: servers.a.filesystem.mounts[6].source: ~/.password-store shows " + filepath.Join(home, ".password-store") + " to the sandbox: a hidden file or directory of your home",
		":16:20: servers.a.filesystem.mounts[7].source: ~/.work/proj2 shows " + filepath.Join(home, ".work") + " to the sandbox: a hidden file or directory of your home",
	}
	wantWarnings(t, summarize(c, filepath.Join(proj, "mcpbox.lock"), proj).Warnings, want)
	// policy check names the other writable places outside the project
	// too (reachWarnings), not those warned of above.
	wantWarnings(t, checkWarnings(c, cfg), append(want,
		":13:20: servers.a.filesystem.mounts[4].source: the server may write to ~/keys-elsewhere, outside the config's directory",
		":14:20: servers.a.filesystem.mounts[5].source: the server may write to ../other, outside the config's directory"))

	// A project kept in a hidden dir shows its own files without a word.
	hidden := filepath.Join(home, ".work", "proj2", "mcpbox.yaml")
	c, err = config.Load(hidden, []byte("version: 1\nservers:\n  a:\n    command: [sh]\n    filesystem:\n      mounts: [{source: ., target: /self}]\n    tools: {allow: [\"*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings(t, checkWarnings(c, hidden), nil)
}

// TestCredentialWarningsRelativeConfig: a config named by a relative path
// (policy check mcpbox.yaml, serve --config mcpbox.yaml) is checked as
// one named absolutely; a mount of the home dir or of mcpbox's state
// root, which serve refuses, and a template from a credential dir, copied
// into a workspace, are named.
func TestCredentialWarningsRelativeConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, d := range []string{".aws", "proj", ".local/state/mcpbox/projects"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join(home, "proj"))
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  a:
    command: [sh]
    filesystem:
      output: {}
      template: ~/.aws
      mounts:
        - {source: ../.aws, target: /aws}
        - {source: .., target: /home}
        - {source: ~/.local/state/mcpbox/projects, target: /st}
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mcpbox.yaml:9:20: servers.a.filesystem.mounts[0].source: ../.aws shows " + filepath.Join(home, ".aws"),
		"mcpbox.yaml:10:20: servers.a.filesystem.mounts[1].source: serve refuses it: .. is or holds your home directory",
		"mcpbox.yaml:11:20: servers.a.filesystem.mounts[2].source: serve refuses it: ~/.local/state/mcpbox/projects would show mcpbox's state root " + filepath.Join(home, ".local/state/mcpbox"),
		"mcpbox.yaml:7:17: servers.a.filesystem.template: ~/.aws shows " + filepath.Join(home, ".aws"),
	}
	wantWarnings(t, checkWarnings(c, "mcpbox.yaml"), want)
	wantWarnings(t, summarize(c, "mcpbox.lock", ".").Warnings, want)
}

// TestStateDirWarning: policy check says that serve refuses a state_dir
// in mcpbox's state root (another project's state dir), and what it
// stops; one elsewhere passes.
func TestStateDirWarning(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	proj := filepath.Join(home, "proj")
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(proj, "mcpbox.yaml")
	for sd, want := range map[string][]string{
		"~/.local/state/mcpbox/projects/victim-0123456789ab": {"mcpbox.yaml:2:12: state_dir " + filepath.Join(home, ".local/state/mcpbox/projects/victim-0123456789ab") + " is in " + filepath.Join(home, ".local/state/mcpbox/projects") + ", where mcpbox keeps other projects' state dirs"},
		"./state":               nil,
		"~/.local/state/mcpbox": nil, // the root itself: configs may share it
	} {
		c, err := config.Load(cfg, []byte("version: 1\nstate_dir: "+sd+"\nservers:\n  a:\n    command: [sh]\n    tools: {allow: [\"*\"]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		ws := checkWarnings(c, cfg)
		wantWarnings(t, ws, want)
		if verdict, stops := ws.Verdict(), len(want) > 0; strings.Contains(verdict, "cannot start: serve") != stops {
			t.Errorf("state_dir %s: verdict %q", sd, verdict)
		}
	}
}

// TestReachWarnings: policy check names what a config lets a server
// write beyond its directory, and an endpoint beyond this machine; what
// stays in the project, read-only mounts and loopback do not count.
func TestReachWarnings(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	proj := filepath.Join(home, "proj")
	for _, d := range []string{"proj/data", "proj/out", "Documents", "out", "ro"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(proj, "mcpbox.yaml")
	load := func(text string) *config.Config {
		t.Helper()
		c, err := config.Load(cfg, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	reach := func(c *config.Config) config.Errors {
		var got config.Errors
		for _, w := range checkWarnings(c, cfg) {
			if strings.Contains(w.Error(), "outside the config's directory") || strings.Contains(w.Error(), "beyond this machine") || strings.Contains(w.Error(), "non-public address") {
				got = append(got, w)
			}
		}
		return got
	}
	c := load(`version: 1
listen: {http: {addr: "0.0.0.0:8765"}}
clients: [{name: ci, token: {from: "file:./tok"}}]
servers:
  a:
    command: [sh]
    filesystem:
      output: {source: ~/out}
      mounts:
        - {source: ~/Documents, target: /docs, mode: rw}
        - {source: ./data, target: /data, mode: rw}
        - {source: ~/ro, target: /ro}
    tools: {allow: ["*"]}
  b:
    command: [sh]
    filesystem: {output: {source: ./out}}
    tools: {allow: ["*"]}
  c:
    image: 127.0.0.1:5000/tools/srv:1
    image_insecure: true
    tools: {allow: ["*"]}
  d:
    image: ghcr.io/o/srv:1
    tools: {allow: ["*"]}
`)
	wantWarnings(t, reach(c), []string{
		"mcpbox.yaml:8:24: servers.a.filesystem.output.source: the server may write to ~/out, outside the config's directory",
		"mcpbox.yaml:10:20: servers.a.filesystem.mounts[0].source: the server may write to ~/Documents, outside the config's directory",
		"mcpbox.yaml:19:12: servers.c.image: mcpbox fetches it from this host, outside any sandbox, at 127.0.0.1:5000, a non-public address",
		"mcpbox.yaml:2:23: listen.http.addr: serve listens on 0.0.0.0:8765, beyond this machine",
	})
	c = load("version: 1\nlisten: {http: {addr: \"127.0.0.1:8765\"}}\nservers:\n  a:\n    command: [sh]\n    tools: {allow: [\"*\"]}\n")
	wantWarnings(t, reach(c), nil)
}

// TestNonPublicHost: an image registry is judged by its address in every
// spelling a reference allows: with or without a port, bracketed, mapped.
func TestNonPublicHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost:5000": true, "127.0.0.1": true, "[::1]": true, "[::1]:5000": true, "[fd00::1]": true,
		"10.0.0.7:5000": true, "[::ffff:169.254.169.254]": true, "169.254.169.254": true, "[fe80::1%eth0]": true,
		"ghcr.io": false, "index.docker.io": false, "8.8.8.8": false, "[2001:db8::1]:443": false,
	} {
		if got := nonPublicHost(host); got != want {
			t.Errorf("nonPublicHost(%s) = %v, want %v", host, got, want)
		}
	}
}

// wantWarnings checks that ws are as many as want, each containing its
// counterpart.
func wantWarnings(t *testing.T, ws config.Errors, want []string) {
	t.Helper()
	var got []string
	for _, w := range ws {
		got = append(got, w.Error())
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

// TestHostReferenceWarnings: policy check names each reference that has
// mcpbox act on the host for a config: a cmd: one runs its program (a
// cloned repository's script), a file: one in a credential dir or another
// hidden entry of the home hands that file to the server. A file in the
// project and an env: reference are not named; serve does not repeat
// them at each start.
func TestHostReferenceWarnings(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	proj := filepath.Join(home, "proj")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(proj, "mcpbox.yaml")
	c, err := config.Load(cfg, []byte(`version: 1
servers:
  a:
    command: [sh]
    secrets:
      PWN: {from: "cmd:/bin/sh pwn.sh"}
      KEY: {from: "file:~/.ssh/id_rsa"}
      CRED: {from: "file:~/.git-credentials"}
      OWN: {from: "file:./token"}
      ENV: {from: "env:HOME"}
    tools: {allow: ["*"]}
clients:
  - {name: ci, token: {from: "cmd:./token.sh"}}
oauth: {store_key: {from: "cmd:pass show mcpbox"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`mcpbox.yaml:6:19: servers.a.secrets.PWN.from: cmd: runs "/bin/sh pwn.sh" on this host as you, outside any sandbox`,
		`mcpbox.yaml:7:19: servers.a.secrets.KEY.from: file: hands ~/.ssh/id_rsa (in ` + filepath.Join(home, ".ssh") + `) to the server`,
		`mcpbox.yaml:8:20: servers.a.secrets.CRED.from: file: hands ~/.git-credentials (in ` + filepath.Join(home, ".git-credentials") + `) to the server`,
		`mcpbox.yaml:13:30: clients[0].token.from: cmd: runs "./token.sh" on this host`,
		`mcpbox.yaml:14:27: oauth.store_key.from: cmd: runs "pass show mcpbox" on this host`,
	}
	var got config.Errors
	for _, w := range checkWarnings(c, cfg) {
		if strings.Contains(w.Error(), ": cmd: ") || strings.Contains(w.Error(), ": file: ") {
			got = append(got, w)
		}
	}
	wantWarnings(t, got, want)
	for _, w := range summarize(c, filepath.Join(proj, "mcpbox.lock"), proj).Warnings {
		if strings.Contains(w.Error(), "on this host as you") {
			t.Errorf("serve's start repeats %v", w)
		}
	}
}

// TestLiteralSecretWarnings: a credential-shaped string written into a
// server's command, args or env is warned about where it is, never
// quoted; an ordinary argument and a secret by reference are not, and
// the dashboard shows the command with the string masked.
func TestLiteralSecretWarnings(t *testing.T) {
	const tok = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  cli:
    command: [/bin/sh, -c, "exec server", "--api-key=`+tok+`"]
    tools: {allow: ["*"]}
  pkg:
    package: npm:some-server@1.0.0
    args: [--verbose, "`+tok+`"]
    env: {LOG: debug, GITHUB_TOKEN: "`+tok+`"}
    tools: {allow: ["*"]}
  clean:
    command: [/bin/sh, -c, "exec server --port 8080"]
    secrets: {GITHUB_TOKEN: {from: env:GH_TOKEN}}
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := literalSecretWarnings(c)
	wantWarnings(t, ws, []string{
		"mcpbox.yaml:4:14: servers.cli.command[3] looks like a credential",
		"mcpbox.yaml:8:11: servers.pkg.args[1] looks like a credential",
		"servers.pkg.env.GITHUB_TOKEN looks like a credential",
	})
	for _, w := range ws {
		if strings.Contains(w.Error(), tok) || strings.Contains(w.Error(), "ghp_") {
			t.Errorf("the warning quotes the credential: %s", w)
		}
	}
	rows := dashboardServers(c, nil, "")
	if shown := strings.Join(rows[0].Command, " "); strings.Contains(shown, tok) || !strings.Contains(shown, "--api-key=") || !strings.Contains(shown, "exec server") {
		t.Errorf("the dashboard's command %q, want the token masked and the rest as written", shown)
	}
}

// TestDashboardServerRows: the servers page says what each server runs:
// a package or image with its args and what the lock pins of it, a
// remote server's URL without the parts that may hold a credential, a
// command; and why a server serve could not set up is unavailable.
func TestDashboardServerRows(t *testing.T) {
	const key = "sk_live_abcdefghijklmnopqrstuvwxyz0123"
	lockPath := filepath.Join(t.TempDir(), "mcpbox.lock")
	sri := "sha512-" + strings.Repeat("A", 86) + "=="
	// A pin counts for the package the config names now: "old" names
	// another range than the one its pin was made for, "local" no package.
	for server, name := range map[string]string{"mem": "@modelcontextprotocol/server-memory", "npx": "@modelcontextprotocol/server-everything",
		"old": "@modelcontextprotocol/server-memory", "local": "stale"} {
		source := "npm:" + name + "@^2026"
		if server == "old" {
			source = "npm:" + name + "@^2025"
		}
		pin := integrity.PackagePin{Ecosystem: "npm", Name: name, Version: "2026.8.31", Source: source, Integrity: sri}
		if err := integrity.WritePackagePin(lockPath, server, pin); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := integrity.ReadLock(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	lock.Images = map[string]integrity.ImagePin{
		"img":   {Digest: digest, Ref: "127.0.0.1:5000/tools/srv:1", Platform: image.HostPlatform().String()},
		"moved": {Digest: digest, Ref: "127.0.0.1:5000/tools/srv:1", Platform: image.HostPlatform().String()}, // the config names :2 now
	}
	if err := integrity.WriteLock(lockPath, lock); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  img:
    image: 127.0.0.1:5000/tools/srv:1
    tools: {allow: ["*"]}
  moved:
    image: 127.0.0.1:5000/tools/srv:2
    tools: {allow: ["*"]}
  old:
    package: npm:@modelcontextprotocol/server-memory@^2026
    tools: {allow: ["*"]}
  mem:
    package: npm:@modelcontextprotocol/server-memory@^2026
    args: [--verbose]
    tools: {allow: ["*"]}
  npx:
    command: [npx, -y, "@modelcontextprotocol/server-everything@^2026"]
    tools: {allow: ["*"]}
  docs:
    url: https://docs.example/mcp/`+key+`?api_key=secret#frag
    tools: {allow: ["*"]}
  zapier:
    url: https://mcp.zapier.com/api/mcp/s/NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1/mcp
    tools: {allow: ["*"]}
  local:
    command: [/usr/bin/server, --port, "8080"]
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]dashboard.Server{}
	for _, r := range dashboardServers(c, map[string]string{"mem": "installing npm:@modelcontextprotocol/server-memory: registry unreachable"}, lockPath) {
		rows[r.Name] = r
	}
	if r := rows["mem"]; r.Package != "npm:@modelcontextprotocol/server-memory@^2026" || strings.Join(r.Command, " ") != "--verbose" ||
		r.Pinned != "npm:@modelcontextprotocol/server-memory@2026.8.31" ||
		r.Status != dashboard.StatusUnavailable || !strings.Contains(r.Error, "registry unreachable") {
		t.Errorf("package row %+v, want the package, its args, the version pinned and why it is unavailable", r)
	}
	if r := rows["img"]; r.Package != "127.0.0.1:5000/tools/srv:1" || r.Pinned != digest {
		t.Errorf("image row %+v, want the image and the digest pinned", r)
	}
	for _, name := range []string{"moved", "old"} {
		if r := rows[name]; r.Pinned != "" {
			t.Errorf("%s row %+v: a pin made for what the config no longer names is shown", name, r)
		}
	}
	if r := rows["npx"]; r.Pinned != "npm:@modelcontextprotocol/server-everything@2026.8.31" {
		t.Errorf("npx row %+v, want the version pinned", r)
	}
	r := rows["docs"]
	if r.Transport != "http" || !strings.HasPrefix(r.URL, "https://docs.example/mcp/") || !strings.HasSuffix(r.URL, "?…") {
		t.Errorf("remote row %+v, want its URL", r)
	}
	for _, hidden := range []string{key, "api_key", "secret", "frag"} {
		if strings.Contains(r.URL, hidden) {
			t.Errorf("the remote server's URL %q shows %q", r.URL, hidden)
		}
	}
	if r := rows["zapier"]; strings.Contains(r.URL, "NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1") || !strings.HasPrefix(r.URL, "https://mcp.zapier.com/api/mcp/s/") {
		t.Errorf("zapier row %+v, want its url with the key in its path masked", r)
	}
	if r := rows["local"]; r.Package != "" || r.URL != "" || r.Pinned != "" || strings.Join(r.Command, " ") != "/usr/bin/server --port 8080" {
		t.Errorf("command row %+v, want the command alone (a stale package pin of its name not shown)", r)
	}
}
