package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDoctorTruthful: doctor's verdict must match what exec can do in the
// same mode. As root here every layer works; an unprivileged user has no
// writable cgroups on this kind of host.
func TestDoctorTruthful(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := m.command(ctx, "doctor", "--json").Output()
		code := 0
		if err != nil {
			code = 1
		}
		checks := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var c struct {
				Name string
				OK   bool
			}
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("doctor --json line %q: %v", line, err)
			}
			checks[c.Name] = c.OK
		}
		for _, name := range []string{"user namespaces", "landlock", "seccomp", "cgroups", "sandbox start"} {
			if _, ok := checks[name]; !ok {
				t.Fatalf("doctor lacks %q: %s", name, out)
			}
		}
		// exec without --allow-degraded succeeds exactly when doctor says
		// cgroups work.
		r := mode{name: m.name, uid: m.uid}.sh(t, "true")
		if (r.code == 0) != checks["cgroups"] {
			t.Fatalf("doctor says cgroups ok=%v, exec at full strength exits %d:\n%s", checks["cgroups"], r.code, r)
		}
		if (code == 0) != (r.code == 0) {
			t.Fatalf("doctor exit %d but a full-strength exec exits %d", code, r.code)
		}
		if r.code != 0 && !strings.Contains(r.stderr, "cgroups") {
			t.Fatalf("refusal does not name the missing layer:\n%s", r)
		}
	})
}
