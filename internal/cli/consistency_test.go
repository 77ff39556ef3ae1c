package cli

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
	"mcpbox/internal/integrity"
)

// TestStrayArguments: a command that takes no arguments refuses them
// rather than ignoring them ("ps ID" would otherwise list everything as
// if the ID had been honoured).
func TestStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"ps", "extra", "--state-dir", t.TempDir()},
		{"ps", "--json", "sbx_1", "--state-dir", t.TempDir()},
		{"doctor", "extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errs := runCLI(args...)
			if code != exitUsage || out != "" || !strings.Contains(errs, "unexpected arguments") {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, exitUsage, out, errs)
			}
		})
	}
}

// usageFlagRE finds the flags a USAGE synopsis spells: -o, --config.
var usageFlagRE = regexp.MustCompile(`(?:^|[\s\[(|])(--?[a-z][a-z-]*)`)

// TestHelpSpellsFlagsAsUsage: every flag a command's USAGE lines mention
// is listed under FLAGS with the same spelling (snapshot's -o was listed
// as --o), and no one-letter flag is listed with two dashes.
func TestHelpSpellsFlagsAsUsage(t *testing.T) {
	commands := []string{"exec", "run", "serve", "doctor", "policy", "secrets", "import", "logs",
		"approvals", "pin", "trust", "ps", "snapshot", "diff"}
	for _, cmd := range commands {
		t.Run(cmd, func(t *testing.T) {
			code, out, _ := runCLI(cmd, "--help")
			usage, flags, ok := strings.Cut(out, "\nFLAGS\n")
			if code != 0 || !ok {
				t.Fatalf("%s --help: exit %d, no FLAGS section (or one with no flag):\n%s", cmd, code, out)
			}
			usage, _, _ = strings.Cut(usage, "\n\n")
			listed := map[string]string{} // bare name -> spelling under FLAGS
			for _, line := range strings.Split(flags, "\n") {
				if f, ok := strings.CutPrefix(line, "  -"); ok {
					f = "-" + strings.Fields(f)[0]
					bare := strings.TrimLeft(f, "-")
					if len(bare) == 1 && f != "-"+bare {
						t.Errorf("FLAGS lists %s; a one-letter flag is -%s", f, bare)
					}
					listed[bare] = f
				}
			}
			for _, m := range usageFlagRE.FindAllStringSubmatch(usage, -1) {
				f := m[1]
				if got, ok := listed[strings.TrimLeft(f, "-")]; ok && got != f {
					t.Errorf("USAGE spells %s, FLAGS %s", f, got)
				}
			}
		})
	}
	if _, out, _ := runCLI("snapshot", "--help"); !strings.Contains(out, "\n  -o FILE\n") {
		t.Errorf("snapshot --help lacks the line \"  -o FILE\":\n%s", out)
	}
}

// TestSecretsPositionalFile: secrets takes FILE as policy check does,
// and lists a remote server's headers, which are references too.
func TestSecretsPositionalFile(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcpbox.yaml")
	write(t, cfg, `version: 1
servers:
  gh:
    command: [x]
    secrets:
      GITHUB_TOKEN: {from: env:GH_TOKEN}
    tools: {allow: ["*"]}
  docs:
    url: https://docs.example.com/mcp
    headers:
      Authorization: {from: "cmd:pass show docs"}
      X-Api-Key: {from: "file:~/.config/docs.key"}
    tools: {allow: ["*"]}
`)
	want := `{"id":"gh/GITHUB_TOKEN","server":"gh","name":"GITHUB_TOKEN","from":"env:GH_TOKEN","as":"env"}
{"id":"docs/Authorization","server":"docs","name":"Authorization","from":"cmd:pass show docs","as":"header"}
{"id":"docs/X-Api-Key","server":"docs","name":"X-Api-Key","from":"file:~/.config/docs.key","as":"header"}
`
	for _, args := range [][]string{
		{"secrets", "--json", cfg},
		{"secrets", cfg, "--json"},
		{"secrets", "--json", "--config", cfg},
	} {
		code, out, errs := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("%v (-want +got):\n%s", args, diff)
		}
	}
	code, out, _ := runCLI("secrets", cfg)
	if code != 0 || !regexp.MustCompile(`(?m)^docs\s+Authorization\s+cmd:pass show docs\s+header`).MatchString(out) {
		t.Errorf("table: exit %d, want a header row for docs/Authorization:\n%s", code, out)
	}
	for _, bad := range [][]string{
		{"secrets"},
		{"secrets", cfg, cfg},
		{"secrets", cfg, "--config", cfg},
	} {
		if code, _, errs := runCLI(bad...); code != exitUsage {
			t.Errorf("%v: exit %d (want %d): %s", bad, code, exitUsage, errs)
		}
	}
}

// TestSummaryLine: one line with every server and what the lock pins of
// it, whatever the number of tools.
func TestSummaryLine(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  github: {command: [x], tools: {allow: ["*"]}}
  docs: {command: [y]}
  raw: {command: [z], pin: "off", tools: {allow: ["*"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]integrity.Pin{}
	for _, n := range []string{"a", "b", "c"} {
		tools[n] = integrity.Pin{}
	}
	lock := &integrity.Lock{Servers: map[string]*integrity.ServerLock{"github": {Tools: tools}}}
	got := daemon.Summarize(c, lock).Line()
	want := "mcpbox.yaml: 3 servers: github (3 tools pinned), docs (tools not yet pinned), raw (pinning off); 1 warning above"
	if got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
	unpinned := daemon.Summarize(c, nil)
	unpinned.Warnings = nil
	if got := unpinned.Line(); !strings.Contains(got, "github (tools not yet pinned)") || !strings.HasSuffix(got, "; no warnings") {
		t.Errorf("summary without a lock file: %q", got)
	}
	// A server serve could not set up: named so, and the line does not
	// say "no warnings" above the warning that says why.
	unpinned.Servers[1].Unavailable = true
	want = "mcpbox.yaml: 3 servers: github (tools not yet pinned), docs (unavailable), raw (pinning off); no config warnings; why 1 server could not be set up below"
	if got := unpinned.Line(); got != want {
		t.Errorf("summary with an unavailable server\n got %q\nwant %q", got, want)
	}
}

// TestCommandLine: the advice's command can be pasted back into a shell.
func TestCommandLine(t *testing.T) {
	got := commandLine("serve", []string{"--config", "/my dir/it's.yaml", "--http", "127.0.0.1:0"})
	want := `mcpbox serve --config '/my dir/it'\''s.yaml' --http 127.0.0.1:0`
	if got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}

// TestOneDirCommandsHideAll: the commands that work on one state dir do
// not offer --all in their help, and say why when given it.
func TestOneDirCommandsHideAll(t *testing.T) {
	for _, cmd := range [][]string{{"logs"}, {"token", "rotate"}, {"ui"}} {
		_, help, _ := runCLI(append(cmd, "--help")...)
		if !strings.Contains(help, "--config FILE") || strings.Contains(help, "--all") {
			t.Errorf("%v --help: want --config and no --all:\n%s", cmd, help)
		}
		if code, _, errOut := runCLI(append(cmd, "--all")...); code != exitUsage && code != 1 || !strings.Contains(errOut, "--all: ") {
			t.Errorf("%v --all: exit %d, %q; want a refusal saying why", cmd, code, errOut)
		}
	}
}
