package workspace

import "os"

// HostPath returns the real path of rel beneath trusted without following
// a symlink in rel (see the Linux build): macOS has no openat2, so each
// component is opened with O_NOFOLLOW from the one before
// (hostPathNoFollow), which refuses everything the Linux build refuses.
func HostPath(trusted, rel string) (string, error) {
	return hostPathNoFollow(trusted, rel, false, 0)
}

// MakeHostDir is HostPath for a directory that mcpbox writes to: missing
// components are made with perm, and every component, the last too, must
// be a directory.
func MakeHostDir(trusted, rel string, perm os.FileMode) (string, error) {
	return hostPathNoFollow(trusted, rel, true, perm)
}
