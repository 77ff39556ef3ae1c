package sandbox

import (
	"io"
	"os"

	"mcpbox/internal/sandbox/initproc"
)

// Main runs the sandbox init (or the idmap holder, or the thaw guard) when the process was
// started as one, and returns otherwise. The program's main (and TestMain of tests that
// start sandboxes) must call it before anything else.
func Main() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case initArg:
		os.Exit(initproc.Run())
	case thawGuardArg:
		os.Exit(runThawGuard())
	case holdArg:
		// Pins a user namespace for idmapped mounts until the host is done
		// with it (idmap_linux.go).
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
}

// holdArg is the hidden first argument that turns the binary into the
// idmap user-namespace holder (initproc.Arg the init); not part of the CLI.
const holdArg = "__mcpbox_hold__"
