//go:build linux && (amd64 || arm64)

package nofile

// getNofile reads this process's RLIMIT_NOFILE into lim (soft, hard) by
// prlimit64(0, RLIMIT_NOFILE, NULL, lim); it returns the raw result, 0 on
// success.
func getNofile(lim *[2]uint64) uintptr
