package daemon

import (
	"fmt"
	"strings"
	"testing"

	"mcpbox/internal/pkginstall"
)

// TestPinErrorHint: a pinned package the registry (or the kept lockfile)
// no longer matches is refused with how to trust the new bytes, naming
// the config serve read; any other install failure is not.
func TestPinErrorHint(t *testing.T) {
	pin := pkginstall.Pin{Ecosystem: pkginstall.NPM, Name: "m", Version: "1.0.0"}
	po := packageOptions{configPath: "/p/my project/mcpbox.yaml"}
	for _, tt := range []struct {
		err  error
		hint bool
	}{
		{fmt.Errorf("installing %s: %w: other", pin, pkginstall.ErrPinMismatch), true},
		{fmt.Errorf("installing %s: %w: it hashes to x", pin, pkginstall.ErrLockfileMismatch), true},
		{fmt.Errorf("installing %s: no network", pin), false},
	} {
		got := po.pinError("mem", pin, tt.err).Error()
		want := "(if the new bytes are trusted: mcpbox update mem --config '/p/my project/mcpbox.yaml')"
		if strings.Contains(got, want) != tt.hint {
			t.Errorf("pinError(%v) = %q; want the hint %q: %v", tt.err, got, want, tt.hint)
		}
	}
	if got := (packageOptions{}).pinError("mem", pin, pkginstall.ErrPinMismatch).Error(); !strings.HasSuffix(got, "(if the new bytes are trusted: mcpbox update mem)") {
		t.Errorf("pinError for the embedded default: %q", got)
	}
}
