package workspace

import "errors"

var (
	// ErrUnsafeEntry: a tar entry or directory entry that would escape the
	// destination, go through a symlink, or make a device, or an entry of
	// a type this package does not write.
	ErrUnsafeEntry = errors.New("unsafe entry")
	// ErrLimit: an archive or tree is larger, has more entries, or is
	// deeper than the limits allow.
	ErrLimit = errors.New("limit exceeded")
	// ErrNotEmpty: the destination of Seed or Restore holds entries.
	ErrNotEmpty = errors.New("destination not empty")
	// ErrTemplate: the template is neither a directory nor a .tar, .tar.gz
	// or .tgz file.
	ErrTemplate = errors.New("unsupported template")
	// ErrSnapshot: the file is not a snapshot this version can read.
	ErrSnapshot = errors.New("not a readable snapshot")
	// ErrNoPart: the snapshot has no part of that name.
	ErrNoPart = errors.New("no such snapshot part")
	// ErrHardLink: a file has links outside the tree being snapshotted.
	ErrHardLink = errors.New("file has a hard link outside the tree")
	// ErrPattern: an include glob is malformed.
	ErrPattern = errors.New("bad include pattern")
	// ErrSymlink: a host path named by a project goes through a symlink,
	// which could point a sandbox's mount anywhere on the host.
	ErrSymlink = errors.New("mcpbox does not follow symlinks in a sandbox's host paths")
	// ErrProtected: a sandbox would get write access to a sensitive host
	// place (see Protected).
	ErrProtected = errors.New("a sandbox may not write there")
)

// ErrUnsupported: workspaces need Linux (openat without following
// symlinks, overlay whiteouts).
var ErrUnsupported = errors.New("workspaces are not supported on this platform")
