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

// acquireFlock takes an exclusive flock on path, creating it, and release
// removes it again, so that no lock file is left beside mcpbox.lock in
// the user's repository. The flock belongs to the open file description,
// so two Pins in one process exclude each other as two processes do.
//
// Removing a lock file is safe because the lock counts only while path
// still names the file locked: a waiter that gets the flock of a file its
// holder removed meanwhile finds path gone or naming another file, and
// starts again. Only a holder removes path, and path names its file (a
// new one is created only where there is none), so two writers never
// hold locks that both count. A file left by a killed writer, or by an
// earlier version (which kept it), is taken over and removed the same way.
func acquireFlock(path string) (release func(), err error) {
	deadline := time.Now().Add(lockWait)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening lock file flock: %w", err)
		}
		if err := flockBefore(f, path, deadline); err != nil {
			f.Close()
			return nil, err
		}
		if held(f, path) {
			return func() {
				os.Remove(path)
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		f.Close() // removed by the holder before: try the current one
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("locking %s: %w", path, ErrLockBusy)
		}
		time.Sleep(time.Millisecond)
	}
}

// flockBefore takes f's exclusive flock, polling until deadline.
func flockBefore(f *os.File, path string, deadline time.Time) error {
	fd := int(f.Fd())
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("locking %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("locking %s: %w", path, ErrLockBusy)
		}
		time.Sleep(delay)
	}
}

// held reports whether path still names f's file.
func held(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, pi)
}
