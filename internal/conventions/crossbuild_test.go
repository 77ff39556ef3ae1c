package conventions

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// crossTargets are the systems mcpbox is built for besides Linux: the
// macOS gateway of the Kubernetes backend (README "macOS",
// docs/kubernetes.md), whose local sandboxes refuse to start
// (sandbox.ErrNeedsLinux). It is cross-built here, not run: CI has no Mac.
// darwin/amd64 builds too, but no file of mcpbox is for one Mac
// architecture, and each build compiles every dependency again (minutes
// on a fresh machine's empty cache): arm64, the Macs Apple still makes,
// checks the build constraints for both.
var crossTargets = []struct{ goos, goarch string }{
	{"darwin", "arm64"},
}

// TestCrossBuild: `go build ./cmd/mcpbox` succeeds for every crossTargets
// entry, so that a Linux-only call in a file without a build constraint
// (unix.O_PATH, openat2, Pdeathsig, Stat_t.Mtim) fails CI, not a macOS
// user. The build cache keeps it to seconds after the first run.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	for _, tc := range crossTargets {
		t.Run(tc.goos+"_"+tc.goarch, func(t *testing.T) {
			t.Parallel() // each mostly waits for its link
			// Only against a hang: a cold build cache under a loaded
			// test run took over 5 minutes (.ci/run warms it first).
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "build", "-o", os.DevNull, "./cmd/mcpbox")
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), "GOOS="+tc.goos, "GOARCH="+tc.goarch, "CGO_ENABLED=0", "GOFLAGS=")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s go build ./cmd/mcpbox: %v\n%s", tc.goos, tc.goarch, err, out)
			}
		})
	}
}

// debugGCFlags are the flags of a build for a debugger (docs/architecture.md,
// "Debugging"): every package unoptimised but the sandbox's, which are
// only kept from inlining. Its clone children run on their parent's stack
// in nosplit functions, whose unoptimised frames exceed the linker's 792
// bytes for a nosplit chain.
var debugGCFlags = []string{"-gcflags=all=-N -l", "-gcflags=mcpbox/internal/sandbox/...=-l"}

// TestDebugBuild: the build docs/architecture.md gives for a debugger
// links, for mcpbox and for mcpbox-init.
func TestDebugBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	args := append(append([]string{"build"}, debugGCFlags...), "-o", t.TempDir(), "./cmd/mcpbox", "./cmd/mcpbox-init")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %q: %v\n%s", args, err, out)
	}
}
