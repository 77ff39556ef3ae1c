package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSecrets injects secrets from each provider, as a variable and as a
// file, and checks the file's mode and owner, and that nothing else of the
// host's environment comes along.
func TestSecrets(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		envVal := randomMarker(t)
		fileVal := randomMarker(t)
		cmdVal := randomMarker(t)
		dir := m.dir(t)
		keyFile := filepath.Join(dir, "key")
		m.writeFile(t, keyFile, fileVal+"\n", 0o600)
		script := `echo "env=$TOKEN"; echo "cmd=$FROM_CMD"; echo "file=$(cat /run/secrets/KEY)"; ` +
			`stat -c 'mode=%a owner=%U' /run/secrets/KEY; echo x > /run/secrets/KEY || echo write-denied; ` +
			`env | grep -c MCPBOX_E2E_TOKEN; env | grep -c '^KEY='; true`
		ctx := t.Context()
		cmd := m.command(ctx, append(append([]string{"exec"}, m.flags...),
			"--secret", "TOKEN=env:MCPBOX_E2E_TOKEN",
			"--secret", "KEY=file:"+keyFile+",as=file",
			"--secret", "FROM_CMD=cmd:printf %s "+cmdVal,
			"--", "sh", "-c", script)...)
		cmd.Env = append(cmd.Env, "MCPBOX_E2E_TOKEN="+envVal)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		got := string(out)
		for _, want := range []string{"env=" + envVal, "cmd=" + cmdVal, "file=" + fileVal, "mode=400 owner=mcpbox", "write-denied"} {
			if !strings.Contains(got, want) {
				t.Fatalf("want %q in:\n%s", want, got)
			}
		}
		if lines := strings.Fields(got); lines[len(lines)-2] != "0" || lines[len(lines)-1] != "0" {
			t.Fatalf("the host variable or the file secret leaked into the environment:\n%s", got)
		}
	})
}

// TestSecretProviderFailure: a secret that cannot be resolved stops the
// sandbox from starting, with an error that names the reference only.
func TestSecretProviderFailure(t *testing.T) {
	m := modes(t)[0]
	for _, ref := range []string{"cmd:false", "env:MCPBOX_E2E_UNSET", "file:/nonexistent/secret"} {
		r := m.exec(t, "", "--secret", "S="+ref, "--", "sh", "-c", "echo started")
		if r.code == 0 || strings.Contains(r.stdout, "started") || !strings.Contains(r.stderr, "--secret S") {
			t.Fatalf("%s: want a refusal before start:\n%s", ref, r)
		}
	}
}
