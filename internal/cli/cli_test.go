package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, exitUsage, "", "USAGE"},
		{[]string{"help"}, 0, "COMMANDS", ""},
		{[]string{"help"}, 0, "kube rbac", ""},
		{[]string{"kube", "role"}, exitUsage, "", `kube: unknown command "role" (want kube rbac)`},
		{[]string{"kube"}, exitUsage, "", "kube: want a subcommand: rbac"},
		{[]string{"kube", "--help"}, 0, "(default: system:serviceaccount:mcp:mcpbox)", ""},
		{[]string{"doctor", "--backend", "k8s"}, exitUsage, "", `--backend "k8s": want local or kubernetes`},
		{[]string{"bogus"}, exitUsage, "", `unknown command "bogus"`},
		{[]string{"status"}, exitUsage, "", `unknown command "status" (did you mean ps?)`},
		{[]string{"-v"}, exitUsage, "", `unknown command "-v" (did you mean version?)`},
		{[]string{"exec", "--help"}, 0, "--allow-degraded", ""},
		{[]string{"exec"}, exitUsage, "", "no command given"},
		{[]string{"exec", "--nope", "--", "true"}, exitUsage, "", "flag provided but not defined"},
		{[]string{"exec", "--memory", "lots", "--", "true"}, exitUsage, "", "--memory"},
		{[]string{"exec", "--mount", "/tmp:/etc", "--", "true"}, exitUsage, "", "the sandbox provides"},
		{[]string{"exec", "--allow-degraded=selinux", "--", "true"}, exitUsage, "", "unknown isolation layer"},
		{[]string{"exec", "--secret", "T=env:MCPBOX_TEST_UNSET_VAR", "--", "true"}, exitUsage, "", "variable is not set"},
		{[]string{"exec", "--secret", "T=literal-value-here", "--", "true"}, exitUsage, "", "must be a reference"},
		{[]string{"policy", "check"}, exitUsage, "", "want a config FILE"},
		{[]string{"policy"}, exitUsage, "", "usage: mcpbox policy check [FILE | --config FILE]"},
		{[]string{"policy", "check", "a.yaml", "--config", "b.yaml"}, exitUsage, "", "config given twice"},
		{[]string{"policy", "check", "--config", "/nonexistent/mcpbox.yaml"}, 1, "", "mcpbox: policy check: reading config: open /nonexistent/mcpbox.yaml: "},
		{[]string{"policy", "check", "/nonexistent/mcpbox.yaml"}, 1, "", "mcpbox: policy check: reading config: open /nonexistent/mcpbox.yaml: "},
		{[]string{"serve", "--config", "/nonexistent/mcpbox.yaml"}, exitUsage, "", "mcpbox: serve: reading config: open /nonexistent/mcpbox.yaml: "},
		{[]string{"ps", "--all", "--state-dir", "/x"}, exitUsage, "", "one at a time"},
		{[]string{"ps", "extra", "--state-dir", "/x"}, exitUsage, "", "unexpected arguments"},
		{[]string{"stop", "x1"}, exitUsage, "", "want one sandbox ID"},
		{[]string{"logs", "--since", "yesterday", "--state-dir", "/nonexistent"}, exitUsage, "", "--since"},
		{[]string{"approve"}, exitUsage, "", "want one approval ID"},
		{[]string{"deny", "--always", "apr_x", "--state-dir", "/x"}, exitUsage, "", "for approve"},
		{[]string{"trust"}, exitUsage, "", "want SERVER"},
		{[]string{"pin", "--config", "/nonexistent.yaml"}, exitUsage, "", "reading config"},
		{[]string{"serve", "extra"}, exitUsage, "", "unexpected arguments"},
		{[]string{"serve", "--print-config"}, 0, "builtin: workspace", ""},
		{[]string{"serve", "--help"}, 0, "--http", ""},
		{[]string{"run", "--help"}, 0, "--allow-tool", ""},
		{[]string{"run"}, exitUsage, "", "no server command given"},
		{[]string{"run", "--timeout", "1s", "--", "true"}, exitUsage, "", "--call-timeout"},
		{[]string{"run", "--output-limit", "big", "--", "true"}, exitUsage, "", "--output-limit"},
		{[]string{"version"}, 0, "mcpbox", ""},
		{[]string{"serv"}, exitUsage, "", "(did you mean serve?)"},
		{[]string{"sreve"}, exitUsage, "", "(did you mean serve?)"},
		{[]string{"serve", "--htpp", "127.0.0.1:0"}, exitUsage, "", "--htpp (did you mean --http?)"},
		{[]string{"logs", "--folow"}, exitUsage, "", "did you mean --follow?"},
		{[]string{"logs", "--limit", "-3"}, exitUsage, "", "logs: --limit -3: want a number of records"},
		{[]string{"logs", "verify", "--json", "--state-dir", "/nonexistent"}, exitUsage, "", "logs verify: --json: verify checks the whole log"},
		{[]string{"logs", "--since", "-5m"}, exitUsage, "", "logs: --since: \"-5m\": a duration ago cannot be negative"},
		{[]string{"exec", "--timeout", "5", "--", "true"}, exitUsage, "", "want a duration such as 30s"},
		{[]string{"exec", "--timeout"}, exitUsage, "", "flag needs an argument: --timeout"},
		{[]string{"exec", "--allow-degraded=bogus", "--", "true"}, exitUsage, "", `invalid value "bogus" for flag --allow-degraded: unknown isolation layer`},
		{[]string{"serve", "--stdio=maybe"}, exitUsage, "", `invalid boolean value "maybe" for flag --stdio`},
		{[]string{"help", "serve"}, 0, "--print-config", ""},
		{[]string{"help", "run"}, 0, "--allow-tool", ""},
		{[]string{"pin", "--help"}, 0, "--allow-degraded", ""},
		{[]string{"pin", "--allow-degraded=selinux"}, exitUsage, "", "unknown isolation layer"},
		{[]string{"update", "--help"}, 0, "--allow-degraded", ""},
		{[]string{"update", "--allow-degraded=selinux", "srv"}, exitUsage, "", "unknown isolation layer"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tt.code, out, errs)
			}
		})
	}
}

// TestUsageErrorsAreShort: a mistyped command or flag gets its error and a
// pointer to the help, not the whole help, which pushed the error off the
// screen.
func TestUsageErrorsAreShort(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"serve", "--htpp", "x"}, {"exec", "--timeout", "5", "--", "true"}, {"run", "--input"}} {
		code, _, errs := runCLI(args...)
		if code != exitUsage || strings.Count(errs, "\n") > 2 || !strings.Contains(errs, "--help") {
			t.Errorf("mcpbox %s: exit %d, stderr (want at most 2 lines naming --help):\n%s", strings.Join(args, " "), code, errs)
		}
	}
}

// TestCommandsMatchUsage: the one command table (dispatch, "did you
// mean", "help CMD") and the usage text name the same commands: each
// command the usage lists at the start of a line is in the table, each
// command of the table the user may run is in the usage, and "did you
// mean" does not offer the hidden ones.
func TestCommandsMatchUsage(t *testing.T) {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(usage, func(r rune) bool { return !('a' <= r && r <= 'z' || r == '-' || r == '_') }) {
		words[w] = true
	}
	for _, c := range commands {
		if !c.hidden && !words[c.name] {
			t.Errorf("command %s is not in the usage text", c.name)
		}
	}
	section := ""
	for _, line := range strings.Split(usage, "\n") {
		if line != "" && 'A' <= line[0] && line[0] <= 'Z' {
			section, _, _ = strings.Cut(line, " ")
			continue
		}
		if section != "COMMANDS" && section != "ADMIN" || !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue
		}
		if name := strings.Fields(line)[0]; !listed(name) {
			t.Errorf("the usage lists %q, which is no command Main runs", name)
		}
	}
	for _, name := range []string{"serve", "pause", "logout", "version"} {
		if code, out, _ := runCLI("help", name); code != 0 || !strings.Contains(out, "USAGE") && name != "version" {
			t.Errorf("mcpbox help %s: exit %d\n%s", name, code, out)
		}
	}
	if _, _, errs := runCLI("agnet"); strings.Contains(errs, "did you mean agent") {
		t.Errorf("a hidden command was offered: %s", errs)
	}
}

func TestDegradedFlag(t *testing.T) {
	var d degradedFlag
	if err := d.Set("true"); err != nil || !d.all {
		t.Fatalf("bare flag: %v %+v", err, d)
	}
	d = degradedFlag{}
	if err := d.Set("cgroups,landlock"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sandbox.Layer{sandbox.LayerCgroups, sandbox.LayerLandlock}, d.layers); diff != "" || d.all {
		t.Fatalf("list: %s", diff)
	}
}

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	write(t, good, "version: 1\nservers:\n  fs:\n    command: [node, server.js]\n    tools: {allow: [\"*\"]}\n")
	write(t, bad, "version: 1\nservers:\n  fs:\n    command: [node]\n    limits: {memroy: 1Gi}\n")
	if code, out, errs := runCLI("policy", "check", good); code != 0 || out != good+": ok\n" || errs != "" {
		t.Fatalf("good config: exit %d %s %s", code, out, errs)
	}
	// No tools: key: valid, but nothing is exposed; the warning says why
	// and gives the line to add.
	noTools := filepath.Join(dir, "notools.yaml")
	write(t, noTools, "version: 1\nservers:\n  github:\n    command: [node, server.js]\n")
	wantWarn := noTools + `:3:3: warning: servers.github: no tools: key, so every tool is hidden (default deny); add  tools: {allow: ["*"]}  to expose them` + "\n"
	if code, out, errs := runCLI("policy", "check", noTools); code != 0 || out != noTools+": ok\n" || errs != wantWarn {
		t.Fatalf("config without tools: exit %d\nstdout: %s\nstderr: %q\nwant stderr %q", code, out, errs, wantWarn)
	}
	warn := filepath.Join(dir, "warn.yaml")
	write(t, warn, "version: 1\nservers:\n  fs:\n    command: [node]\n    env: {API_TOKEN: abc123}\n    tools: {allow: [\"*\"]}\n")
	if code, out, errs := runCLI("policy", "check", warn); code != 0 || !strings.Contains(out, "ok") || !strings.HasPrefix(errs, warn+":5:11: warning:") {
		t.Fatalf("warning config: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	// What serve would warn about on this host: a variable not set.
	unset := filepath.Join(dir, "unset.yaml")
	write(t, unset, "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/mcp\n    query: {api_key: {from: env:MCPBOX_TEST_UNSET_VAR}}\n    tools: {allow: [\"*\"]}\n")
	t.Setenv("MCPBOX_TEST_UNSET_VAR", "")
	os.Unsetenv("MCPBOX_TEST_UNSET_VAR")
	// Valid, so exit 0, but not "ok": the line says what cannot start.
	if code, out, errs := runCLI("policy", "check", unset); code != 0 || out != unset+": valid, but on this machine cannot start: server r (see the warnings above)\n" ||
		!strings.HasPrefix(errs, unset+":5:13: warning: servers.r.query.api_key:") || !strings.Contains(errs, "cannot start until serve is started again with the variable set") {
		t.Fatalf("config with an unset variable: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	// A writable output serve refuses stops serve itself; a server named
	// once however many warnings stop it.
	t.Setenv("HOME", dir)
	refused := filepath.Join(dir, "refused.yaml")
	write(t, refused, "version: 1\nservers:\n  w:\n    command: [nosuchprog]\n    filesystem: {input: {source: ./none}, output: {source: .}}\n    tools: {allow: [\"*\"]}\n")
	if code, out, errs := runCLI("policy", "check", refused); code != 0 || out != refused+": valid, but on this machine cannot start: server w, serve (see the warnings above)\n" {
		t.Fatalf("config whose output serve refuses: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	// It reads no file a reference names: a FIFO there would hang it.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fileRef := filepath.Join(dir, "fileref.yaml")
	write(t, fileRef, "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/mcp\n    query: {api_key: {from: \"file:"+fifo+"\"}}\n    tools: {allow: [\"*\"]}\n")
	if code, out, errs := runCLI("policy", "check", fileRef); code != 0 || !strings.Contains(out, "ok") || errs != "" {
		t.Fatalf("config with a file: reference: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	code, _, errs := runCLI("policy", "check", bad)
	if code != 1 || !strings.HasPrefix(errs, bad+":5:") || !strings.Contains(errs, "memroy") {
		t.Fatalf("bad config: exit %d, stderr %q; want %s:5:COL naming the key", code, errs, bad)
	}
}

func TestSpecFromPolicyRefusesWhatItCannotEnforce(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"secrets": "    secrets: {T: {from: env:X}}\n",
	}
	write(t, filepath.Join(dir, "remote.yaml"), "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/mcp\n")
	var remote sandbox.Spec
	if err := specFromPolicy(filepath.Join(dir, "remote.yaml"), &remote); err == nil || !strings.Contains(err.Error(), "remote") {
		t.Fatalf("specFromPolicy accepted a remote server: %v", err)
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(dir, name+".yaml")
			write(t, cfg, "version: 1\nservers:\n  s:\n    command: [x]\n"+extra)
			var spec sandbox.Spec
			if err := specFromPolicy(cfg, &spec); err == nil || !strings.Contains(err.Error(), "not") {
				t.Fatalf("specFromPolicy accepted %s: %v", name, err)
			}
		})
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultOutputSize: the embedded default of mcpbox serve bounds the
// workspace server's output at 1 GiB, as parsed and compiled into its Spec.
func TestDefaultOutputSize(t *testing.T) {
	c, err := config.Load("(embedded default)", defaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, s := range c.Servers {
		if s.Builtin != config.BuiltinWorkspace {
			continue
		}
		found = true
		spec, err := specconv.Server(c, s, specconv.Options{Base: t.TempDir(), StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if spec.Output == "" || spec.Limits.OutputSize != 1<<30 {
			t.Fatalf("server %s: output %q limited to %d bytes, want 1 GiB", s.Name, spec.Output, spec.Limits.OutputSize)
		}
	}
	if !found {
		t.Fatal("the embedded default has no workspace server")
	}
}

// TestOutputSizeFlag: --output-size sets the Spec's limit, a bad size is
// refused by name.
func TestOutputSizeFlag(t *testing.T) {
	parse := func(args ...string) (*sandbox.Spec, error) {
		fs := flag.NewFlagSet("exec", flag.ContinueOnError)
		var f sandboxFlags
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.spec(fs)
	}
	spec, err := parse("--output", t.TempDir(), "--output-size", "16Mi")
	if err != nil || spec.Limits.OutputSize != 16<<20 {
		t.Fatalf("--output-size 16Mi: spec limits %+v, error %v", spec.Limits, err)
	}
	for _, args := range [][]string{{"--output", t.TempDir(), "--output-size", "1g"}, {"--output-size", "1Gi"}} {
		if _, err := parse(args...); err == nil || !strings.Contains(err.Error(), "--output-size") {
			t.Fatalf("%v: %v, want an error naming the flag", args, err)
		}
	}
}

func TestSecretsListing(t *testing.T) {
	t.Setenv("MCPBOX_TEST_SECRET", "value-that-must-not-show")
	cfg := filepath.Join(t.TempDir(), "mcpbox.yaml")
	write(t, cfg, `version: 1
servers:
  gh:
    command: [x]
    secrets:
      GITHUB_TOKEN: {from: env:MCPBOX_TEST_SECRET}
      KEY: {from: "file:/etc/key.pem", as: file, ttl: 1h}
`)
	code, out, errs := runCLI("secrets", "--config", cfg, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `{"id":"gh/GITHUB_TOKEN","server":"gh","name":"GITHUB_TOKEN","from":"env:MCPBOX_TEST_SECRET","as":"env"}
{"id":"gh/KEY","server":"gh","name":"KEY","from":"file:/etc/key.pem","as":"file","ttl":"1h"}
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Fatalf("secrets --json (-want +got):\n%s", diff)
	}
	code, out, _ = runCLI("secrets", "--config", cfg)
	if code != 0 || strings.Contains(out, "value-that-must-not-show") || !strings.Contains(out, "GITHUB_TOKEN") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
}

// TestReorder: flags after positional arguments are moved before them,
// each with its value unless it is a boolean.
func TestReorder(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("event", "", "")
	fs.String("config", "", "")
	fs.Bool("json", false, "")
	got := reorder(fs, []string{"verify", "--event", "trust", "--json", "ID", "--config=c.yaml", "--", "-x"})
	want := []string{"--event", "trust", "--json", "--config=c.yaml", "verify", "ID", "-x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("reorder (-want +got):\n%s", diff)
	}
}

// TestMessagesPrintable: what a config or a project chooses (a command
// name, a symlink target) reaches the terminal with its escape sequences,
// carriage returns and bidirectional overrides written out, so that it
// cannot clear the screen or forge "ok" over a warning.
func TestMessagesPrintable(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcpbox.yaml")
	evil := "\x1b[2J\x1b[Hmcpbox.yaml: ok\r\u202e"
	if err := os.WriteFile(cfg, []byte("version: 1\nservers:\n  s:\n    command: [\""+strings.ReplaceAll(strings.ReplaceAll(evil, "\x1b", `\e`), "\r", `\r`)+"\"]\n    tools: {allow: ['*']}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, stderr := runCLI("policy", "check", cfg)
	// Any other message (a refused symlink names its target).
	var errb bytes.Buffer
	(&env{stderr: &errb}).errorf("--output: %s is a symlink to %s", "out", evil)
	for _, out := range []string{stderr, errb.String()} {
		if strings.ContainsAny(out, "\x1b\r\u202e") || !strings.Contains(out, `\x1b[2J\x1b[Hmcpbox.yaml: ok\r\u202e`) {
			t.Errorf("stderr %q: want the name's escapes written out", out)
		}
	}
}
