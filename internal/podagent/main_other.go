//go:build !linux

package podagent

import (
	"errors"
	"fmt"
	"io"
)

// ErrAgentNeedsLinux is Main's error outside Linux: the agent runs in a
// pod's Linux container (PR_SET_CHILD_SUBREAPER, Pdeathsig, openat2), and
// the gateway of another system only talks to it (Connect, StartJob).
var ErrAgentNeedsLinux = errors.New("mcpbox agent runs inside a Kubernetes pod and needs Linux; the pods run the Linux build of mcpbox (backend.agent_image)")

// Main refuses to run outside Linux; it returns exit code 2.
func Main(args []string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "mcpbox agent: %v\n", ErrAgentNeedsLinux)
	return 2
}
