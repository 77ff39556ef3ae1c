package e2e

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"mcpbox/internal/integrity"
)

// TestPinConcurrent: `mcpbox pin` of three servers of one config, run at
// once, loses none of the three (the lock file's writes exclude each
// other), and leaves no lock file of the lock file beside it.
func TestPinConcurrent(t *testing.T) {
	m := modes(t)[0]
	names := []string{"pa", "pb", "pc"}
	cfg := gwConfigWith(t, m, gwConfigOpts{servers: names})
	results := make([]result, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = pkgCLI(t, m, nil, append([]string{"pin", "--config", cfg}, append(m.flags, name)...)...) // no t.Fatal off the test's goroutine
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("mcpbox pin %s:\n%s", names[i], r)
		}
	}
	lock, err := integrity.ReadLock(lockBeside(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if s := lock.Servers[name]; s == nil || len(s.Tools) == 0 {
			t.Errorf("the lock file has no tools of %s: %+v", name, s)
		}
	}
	if _, err := os.Lstat(lockBeside(cfg) + ".flock"); !os.IsNotExist(err) {
		t.Errorf("pin left %s.flock beside the lock: %v", filepath.Base(lockBeside(cfg)), err)
	}
}
