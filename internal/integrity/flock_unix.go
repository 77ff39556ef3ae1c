//go:build unix

package integrity

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockWait bounds how long a writer waits for another process's flock; a
// gateway must not hang on a stuck `mcpbox pin`.
const lockWait = 10 * time.Second

// acquireFlock takes an exclusive flock on path, creating it. The flock
// belongs to the open file description, so two Pins in one process
// exclude each other as two processes do.
func acquireFlock(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file flock: %w", err)
	}
	fd := int(f.Fd())
	deadline := time.Now().Add(lockWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				unix.Flock(fd, unix.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, ErrLockBusy)
		}
		time.Sleep(delay)
	}
}
