package cli

import (
	"io"
	"os"
)

// stdinIsClient reports whether serve's standard input is a client's
// stream, so that serve speaks MCP on stdio: a pipe, a socket (what
// Node's child_process gives a child) or a file. A terminal (a person
// started serve), /dev/null (a service manager) or anything else that
// is no stream means HTTP; so does a standard input that cannot be
// examined, which no client can be talking on.
func stdinIsClient(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return r != nil // a stream handed to Main
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	switch fi.Mode().Type() {
	case os.ModeNamedPipe, os.ModeSocket, 0:
		return true
	}
	return false
}
