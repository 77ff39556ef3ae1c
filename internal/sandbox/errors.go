package sandbox

import "errors"

// ErrExited is returned by Pause once the sandbox was killed or its init
// has exited: there is nothing left to freeze.
var ErrExited = errors.New("sandbox has exited")

// ErrMountSocket is returned by Start for a mount whose source is a unix
// socket or holds one in its top two levels, when the host's Landlock
// cannot keep the workload from connecting to it (see socketsGuarded).
var ErrMountSocket = errors.New("unix socket in a mount source")

// ErrNoCgroups is returned by CheckCgroups when a controller that the
// limits need cannot be used by this process (no delegation, say).
var ErrNoCgroups = errors.New("no usable cgroups")
