package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBrowserSystemView: the system view carries what a headless browser
// reads besides /usr — fontconfig's config and Debian's chromium launcher
// settings — read-only, and nothing else of /etc comes with them.
func TestBrowserSystemView(t *testing.T) {
	requireSandbox(t)
	var want []string
	for _, p := range []string{"/etc/fonts/fonts.conf", "/etc/chromium.d/default-flags", "/etc/chromium/master_preferences"} {
		if _, err := os.Stat(p); err == nil {
			want = append(want, p)
		}
	}
	if len(want) == 0 {
		t.Skip("neither fontconfig nor chromium is installed on this host")
	}
	script := `for f in "$@"; do
  if cat "$f" >/dev/null; then echo "read $f"; fi
  if true >>"$f" 2>/dev/null; then echo "WROTE $f"; fi
  if touch "$(dirname "$f")/planted" 2>/dev/null; then echo "PLANTED $(dirname "$f")"; fi
done
for f in /etc/shadow /etc/ssh /etc/sudoers /etc/chromium.d/../shadow; do
  if [ -e "$f" ]; then echo "SEES $f"; fi
done`
	var out, errb bytes.Buffer
	res, err := Run(context.Background(), quick(append([]string{"sh", "-c", script, "sh"}, want...)...), Stdio{Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("probe: %v, exit %d, stderr %s", err, res.ExitCode, errb.String())
	}
	got := out.String()
	for _, p := range want {
		if !strings.Contains(got, "read "+p+"\n") {
			t.Errorf("the sandbox cannot read %s:\n%s%s", p, got, errb.String())
		}
	}
	for _, bad := range []string{"WROTE", "PLANTED", "SEES"} {
		if strings.Contains(got, bad) {
			t.Errorf("the browser's system view is not read-only and curated:\n%s", got)
		}
	}
	// fontconfig finds its config (without it: "Fontconfig error: Cannot
	// load default config file").
	if _, err := exec.LookPath("fc-match"); err == nil && strings.Contains(strings.Join(want, " "), "/etc/fonts") {
		out.Reset()
		errb.Reset()
		res, err := Run(context.Background(), quick("fc-match", "sans-serif"), Stdio{Stdout: &out, Stderr: &errb})
		if err != nil || res.ExitCode != 0 || strings.Contains(errb.String(), "Fontconfig error") || out.Len() == 0 {
			t.Errorf("fc-match in the sandbox: %v, exit %d, stdout %q, stderr %q", err, res.ExitCode, out.String(), errb.String())
		}
	}
}
