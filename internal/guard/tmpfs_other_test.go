//go:build !linux

package guard

import "testing"

// smallTmpfs skips: a size-limited tmpfs is mounted on Linux only.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	t.Skip("a small tmpfs is mounted on Linux only")
	return ""
}
