//go:build unix

package integrity

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFlockExcludesAndLeavesNothing: writers taking the lock file's lock
// at once (each its own open file, as processes) never hold it together,
// although each removes the lock file when it is done; afterwards no
// lock file is left beside the lock, and one an earlier version left is
// taken over and removed.
func TestFlockExcludesAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpbox.lock.flock")
	const writers, rounds = 6, 40
	var inside, overlaps, done atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				release, err := acquireFlock(path)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(50 * time.Microsecond)
				inside.Add(-1)
				done.Add(1)
				release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d of %d acquisitions overlapped another", n, done.Load())
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("lock file after the writers: %v, want it gone", err)
	}

	// A lock file left by an earlier version, or a killed writer.
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	release, err := acquireFlock(path)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("a left lock file after a write: %v, want it gone", err)
	}
}
