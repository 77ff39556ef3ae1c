//go:build !linux

package sandbox

// CleanupStaleDirs has nothing to remove where sandboxes cannot run.
func CleanupStaleDirs() ([]string, error) { return nil, nil }
