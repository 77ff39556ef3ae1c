package sandbox

import (
	"regexp"
	"testing"
)

// TestIDs: fresh ids differ and have the form mcpbox ps and the audit
// show: "sbx_" and 16 lower-case base32 characters.
func TestIDs(t *testing.T) {
	a, b := NewID(), NewID()
	form := regexp.MustCompile(`^sbx_[a-z2-7]{16}$`)
	if a == b || !form.MatchString(a) || !form.MatchString(b) {
		t.Fatalf("NewID: %q, %q", a, b)
	}
}
