package cli

import (
	"strings"
	"testing"
)

// TestServeDefaultLoadError: when the embedded default does not load,
// serve says why and exits 2; the working dir's lookup used to replace
// that error with its own nil, and serve went on with no config.
func TestServeDefaultLoadError(t *testing.T) {
	saved := defaultConfig
	defaultConfig = []byte("version: 1\nservers: {}\nbogus: 1\n")
	t.Cleanup(func() { defaultConfig = saved })
	code, _, errs := runCLI("serve", "--stdio", "--state-dir", t.TempDir())
	if code != exitUsage || !strings.Contains(errs, "(embedded default)") || !strings.Contains(errs, "bogus") {
		t.Fatalf("serve with a broken default: exit %d, stderr %q; want exit %d naming the error", code, errs, exitUsage)
	}
}
