package cli

import (
	"strings"
	"testing"
)

// TestLogsUnknownEvent: a mistyped --event is refused, naming the events,
// rather than looking like a log with no such records.
func TestLogsUnknownEvent(t *testing.T) {
	code, out, errOut := runCLI("logs", "--event", "sesion_start", "--state-dir", t.TempDir())
	if code != exitUsage || out != "" || !strings.Contains(errOut, `--event "sesion_start"`) || !strings.Contains(errOut, "session_start") {
		t.Errorf("logs --event sesion_start: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
