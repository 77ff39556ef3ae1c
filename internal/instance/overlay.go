package instance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// OverlayLockWait is how long LockOverlay waits for an input overlay
// whose sandbox is ending (a restart, a stop then the next call).
const OverlayLockWait = 3 * time.Second

// ErrOverlayBusy: another running sandbox (of another serve instance on
// the state dir) has the same input overlay mounted.
var ErrOverlayBusy = errors.New("the input overlay is in use by another mcpbox serve on this state dir, or by this serve's sandbox for clients of the other MCP revision")

// LockOverlay takes the flock of the overlay workspace base (BASE/
// overlay.lock) for as long as a sandbox has it mounted: overlayfs leaves
// two mounts sharing an upper dir undefined, and instances on one state
// dir serve the same agent (the stdio clients are all _local). The lock
// is per open file, so a sandbox of this process still ending blocks too,
// for OverlayLockWait at most.
func LockOverlay(base string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(base, "overlay.lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the input overlay: %w", err)
	}
	deadline := time.Now().Add(OverlayLockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (%s): one overlay per agent and server; give each client its own with scope: session (a session's changes are kept when it ends: mcpbox diff --server NAME --session ID), or stop the other (mcpbox ps)", ErrOverlayBusy, base)
			}
			return nil, fmt.Errorf("locking the input overlay: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
