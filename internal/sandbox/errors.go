package sandbox

import "errors"

// ErrExited is returned by Pause once the sandbox was killed or its init
// has exited: there is nothing left to freeze.
var ErrExited = errors.New("sandbox has exited")
