package sandbox

import (
	"errors"
	"runtime"
	"testing"
)

// TestLocalSupported: only Linux runs local sandboxes; elsewhere (macOS,
// whose build is only cross-compiled in CI) the error says what to do
// and carries the command line's config-error exit code, so that exec,
// run and serve fail alike and at once.
func TestLocalSupported(t *testing.T) {
	if err := LocalSupported("linux"); err != nil {
		t.Errorf("LocalSupported(linux) = %v", err)
	}
	for _, goos := range []string{"darwin", "windows", "freebsd"} {
		err := LocalSupported(goos)
		var se *StartError
		if !errors.As(err, &se) || !errors.Is(err, ErrNeedsLinux) {
			t.Fatalf("LocalSupported(%s) = %v; want a *StartError of ErrNeedsLinux", goos, err)
		}
		if se.Code != ExitNeedsLinux || ExitNeedsLinux != 2 {
			t.Errorf("LocalSupported(%s): exit code %d, want 2 (config error)", goos, se.Code)
		}
		if got, want := err.Error(), "local sandboxes need Linux; use backend: kubernetes"; got != want {
			t.Errorf("LocalSupported(%s) says %q, want %q", goos, got, want)
		}
	}
	if err := Local(); (err == nil) != (runtime.GOOS == "linux") {
		t.Errorf("Local() = %v on %s", err, runtime.GOOS)
	}
}
