// Command mcpbox runs MCP servers (or any command) in Linux sandboxes and
// stands between MCP clients and those servers as a policy gateway.
// See README.md and docs/.
package main

import (
	"os"
	"runtime/debug"
	"time"

	"mcpbox/internal/cli"
	"mcpbox/internal/sandbox"
)

// A Go process collects garbage for the first time at 4 MB of heap. The
// package initialisation of this binary and one sandbox start allocate
// just under that (~3.7 MB), and one collection costs a short `mcpbox
// exec` 3-5 ms of CPU, as much as bubblewrap's whole start (issue 19,
// docs/performance.md). So the first startGCFor of `mcpbox exec` runs with
// GOGC=startGC (first collection at 8 MB), then the default again. The
// other commands (the gateway's memory is measured too), a GOGC set by
// the user and the sandbox init (it never returns from sandbox.Main) are
// left alone.
const (
	startGC    = 200
	startGCFor = time.Second
)

func main() {
	sandbox.Main() // the sandbox init is this binary re-executed
	if len(os.Args) > 1 && os.Args[1] == "exec" && os.Getenv("GOGC") == "" {
		prev := debug.SetGCPercent(startGC)
		time.AfterFunc(startGCFor, func() { debug.SetGCPercent(prev) })
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
