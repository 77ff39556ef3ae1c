package landlock

import "errors"

// ErrUnsupported reports that Landlock is not available: a non-Linux
// platform, a kernel built without it, or Landlock disabled at boot.
var ErrUnsupported = errors.New("landlock unsupported")
