package sandbox

import (
	"errors"
	"runtime"
)

// ErrNeedsLinux is the error of every local sandbox on a system other
// than Linux: a sandbox is built of Linux namespaces, Landlock, seccomp
// and cgroups. There (macOS), mcpbox runs servers on the Kubernetes
// backend only, whose pods are Linux.
var ErrNeedsLinux = errors.New("local sandboxes need Linux; use backend: kubernetes")

// ExitNeedsLinux is the exit code of a command that asked for a local
// sandbox where none can run: the command line's code for config and
// usage errors (2), since the fix is the config (backend: kubernetes),
// not the host or the command.
const ExitNeedsLinux = 2

// LocalSupported returns nil when local sandboxes can run on goos (a
// GOOS value; Local passes runtime.GOOS), else a *StartError of
// ErrNeedsLinux with Code ExitNeedsLinux. A caller asks before anything
// else, so that the user reads this and not a missing layer's error.
func LocalSupported(goos string) error {
	if goos == "linux" {
		return nil
	}
	return &StartError{Layer: LayerUserns, Code: ExitNeedsLinux, Err: ErrNeedsLinux}
}

// Local is LocalSupported for the system this binary runs on.
func Local() error { return LocalSupported(runtime.GOOS) }
