package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuardAuditFailsClosed deletes the audit database under a running
// guard: the next call runs but its record cannot be committed, so its
// result is withheld; the calls after it are refused without running,
// both with an error that names the audit problem.
func TestGuardAuditFailsClosed(t *testing.T) {
	r := newGuardRig(t, nil)
	if out, isErr := r.call(t, "before"); isErr || out != "before" {
		t.Fatalf("call before the failure: %q %v", out, isErr)
	}
	if err := os.Remove(filepath.Join(r.dir, "audit.db")); err != nil {
		t.Fatal(err)
	}
	out, isErr := r.call(t, "secret-result")
	if !isErr || strings.Contains(out, "secret-result") || !strings.Contains(out, "result of echo is withheld") ||
		!strings.Contains(out, "deleted or replaced") {
		t.Fatalf("call whose record cannot be committed: %q (isError %v), want its result withheld", out, isErr)
	}
	for range 3 {
		out, isErr := r.call(t, "after")
		if !isErr || !strings.Contains(out, "echo was not run: the audit log cannot be written (its database file was deleted or replaced)") {
			t.Fatalf("call while the audit store fails: %q (isError %v), want it refused", out, isErr)
		}
	}
}

// TestGuardAuditOnFailureAllow: with audit.on_failure: allow, the same
// calls go through, unaudited, and are counted.
func TestGuardAuditOnFailureAllow(t *testing.T) {
	r := newGuardRigWith(t, guardTestConfig+"audit: {on_failure: allow}\n", nil)
	if err := os.Remove(filepath.Join(r.dir, "audit.db")); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two"} {
		if out, isErr := r.call(t, text); isErr || out != text {
			t.Fatalf("call with on_failure allow: %q (isError %v), want %q", out, isErr, text)
		}
	}
	if n := r.g.unaudited.Load(); n != 2 {
		t.Fatalf("%d unaudited calls counted, want 2", n)
	}
}
