package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportNotesNoCgroups: importing as a user whose sandboxes cannot
// get cgroups says that serve will refuse the servers here, and how to
// start it, since the client that launches serve shows only that the
// connection closed; root, who has cgroups, gets no such note.
func TestImportNotesNoCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching to the unprivileged user needs root")
	}
	const note = "serve will exit 1 at once here"
	for _, m := range []mode{{name: "root"}, {name: "unprivileged", uid: nobody}} {
		t.Run(m.name, func(t *testing.T) {
			cgroups := doctorCgroups(t, m)
			dir := m.dir(t)
			in := filepath.Join(dir, "claude_desktop_config.json")
			m.writeFile(t, in, `{"mcpServers": {"mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`, 0o644)
			r := defaultRun(t, m, dir, "", "import", in)
			if r.code != 0 {
				t.Fatalf("import:\n%s", r)
			}
			if got := strings.Contains(r.stderr, note); got == cgroups || got && !strings.Contains(r.stderr, "--allow-degraded=cgroups") {
				t.Errorf("doctor's cgroups ok %v; import said %q: %v:\n%s", cgroups, note, got, r.stderr)
			}
		})
	}
}
