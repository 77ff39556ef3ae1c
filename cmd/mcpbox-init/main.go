//go:build linux

// Command mcpbox-init is the sandbox init alone: what mcpbox runs as pid 1
// of each sandbox, without the gateway's packages, whose initialization
// would otherwise delay every sandbox start by milliseconds. Installed next
// to mcpbox from the same build, mcpbox starts it instead of re-executing
// itself (internal/sandbox/initbin_linux.go); it is not meant to be run by
// hand. It links internal/sandbox/initproc, not internal/sandbox, so not
// even the host side's packages (the egress proxy's net/http and TLS,
// cgroups, build info) are initialised at each start
// (internal/conventions: TestLeanInitDependencies).
package main

import (
	"fmt"
	"os"

	"mcpbox/internal/sandbox/initproc"
)

func main() {
	initproc.Main() // exits when started as the init
	fmt.Fprintln(os.Stderr, "mcpbox-init: the sandbox init of mcpbox; mcpbox starts it, not you")
	os.Exit(2)
}
