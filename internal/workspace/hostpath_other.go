//go:build !linux && !darwin

package workspace

import "os"

// HostPath is refused here: see the Linux (openat2) and macOS
// (hostPathNoFollow) builds.
func HostPath(trusted, rel string) (string, error) { return "", ErrUnsupported }

// MakeHostDir is refused here: see the Linux (openat2) and macOS
// (hostPathNoFollow) builds.
func MakeHostDir(trusted, rel string, perm os.FileMode) (string, error) { return "", ErrUnsupported }
