package builtin

import (
	"os"
	"strings"
	"testing"

	"mcpbox/internal/config"
)

// defaultPolicy is the command policy of the workspace server in the
// embedded default of `mcpbox serve` (internal/cli/default.yaml), parsed
// as serve parses it, with no executable dirs: every bare name counts as
// a system program, found or not, so the host's tools do not matter.
func defaultPolicy(t *testing.T) CommandPolicy {
	t.Helper()
	raw, err := os.ReadFile("../cli/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load("default.yaml", raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Servers {
		if s.Builtin == config.BuiltinWorkspace {
			return CommandPolicy{Allow: s.Commands.Allow, Deny: s.Commands.Deny, Approve: s.Commands.Approve, dirs: []string{t.TempDir()}}
		}
	}
	t.Fatal("the embedded default has no workspace server")
	return CommandPolicy{}
}

// TestDefaultCommandsCoverProjectTools: the default allows the usual
// build and test tools of common project types, and still refuses what
// its deny list names, also through a shell.
func TestDefaultCommandsCoverProjectTools(t *testing.T) {
	p := defaultPolicy(t)
	for _, line := range []string{
		"npm test", "npx tsc --noEmit", "pnpm install --offline", "yarn build", "node index.js",
		"python3 -m pytest", "pytest -q", "cargo test", "rustc --version", "go test ./...",
		"java -version", "javac Main.java", "mvn -o test", "gradle test --offline",
		"dotnet test", "ruby -v", "bundle exec rake", "php -v", "composer install", "make",
		"bash -c true", "sh -c true", "git status", "ls -la",
	} {
		argv := strings.Fields(line)
		if d := p.check(argv, "/"); d.v != allowed {
			t.Errorf("%q: %v", line, p.policyError(argv, d))
		}
	}
	for _, line := range []string{"git push origin main", "sh -c git push", "bash -c git fetch", "env git clone x"} {
		argv := strings.Fields(line)
		if d := p.check(argv, "/"); d.v == allowed || d.rule == "" {
			t.Errorf("%q: decided %v by rule %q, want a deny rule", line, d.v, d.rule)
		}
	}
}

// TestRefusalSaysHowToAllow: a program the policy does not allow is
// refused with the config key and the line that would allow it.
func TestRefusalSaysHowToAllow(t *testing.T) {
	tests := []struct {
		p    CommandPolicy
		argv []string
		want []string
	}{
		{defaultPolicy(t), []string{"terraform", "plan"}, []string{`no allow rule matches`, `commands.allow`, `commands: {allow: [..., "terraform"]}`, "mcpbox serve --print-config"}},
		{defaultPolicy(t), []string{"/opt/bin/terraform", "plan"}, []string{`commands: {allow: [..., "/opt/bin/terraform *"]}`}},
		{CommandPolicy{dirs: []string{"/nonexistent"}}, []string{"ls"}, []string{"no commands are allowed", `commands: {allow: [..., "ls"]}`}},
	}
	for _, tt := range tests {
		d := tt.p.check(tt.argv, "/")
		err := tt.p.policyError(tt.argv, d)
		if err == nil {
			t.Errorf("%q allowed, want a refusal", tt.argv)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: refusal %q lacks %q", tt.argv, err, w)
			}
		}
	}
}
