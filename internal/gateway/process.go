package gateway

import (
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Process is a running upstream server, as a Launch function returns it.
// Set either Stdin and Stdout (a stdio server) or Conn (e.g. a go-sdk
// StreamableClientTransport's connection to a remote server).
type Process struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Conn   mcp.Connection
	// Roots answer the server's roots/list: the sandbox's own mounts,
	// never the client's host paths.
	Roots []Root
	// Stop ends the process and frees what it holds; it is called once,
	// after the connection is closed, and may block until the process is gone.
	Stop func()
	// Gone, if set, is called instead of Stop when the server's side
	// of the connection ended first, unasked (it exited, it crashed):
	// it frees what Stop frees, but the end is the server's own, not a
	// stop (mcpbox ps: "exited with status 3", not "stopped by mcpbox").
	Gone func()
	// Describe, if set, says how the process ended (e.g. its exit status),
	// for logs and error messages.
	Describe func() string
	// Clean, if set, reports whether the process ended by exiting with
	// status 0 (restart on-failure leaves such a server stopped).
	Clean func() bool
	// Pause and Resume, if set, freeze and thaw the process (nothing of
	// it runs in between, its memory is kept): Server.Idle's IdlePause.
	Pause, Resume func() error
	// Negotiated, if set, learns the protocol version the session-based
	// initialize agreed on: a remote server's HTTP transport sends it as
	// the MCP-Protocol-Version header of later requests.
	Negotiated func(version string)

	once sync.Once
}

// Root is one entry of a roots/list answer.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

func (p *Process) stop() { p.end(false) }

// gone is stop for a process whose server ended its side first.
func (p *Process) gone() { p.end(true) }

func (p *Process) end(gone bool) {
	p.once.Do(func() {
		if p.Conn != nil {
			p.Conn.Close()
		}
		switch {
		case gone && p.Gone != nil:
			p.Gone()
		case p.Stop != nil:
			p.Stop()
		}
	})
}

func (p *Process) describe() string {
	if p == nil || p.Describe == nil {
		return ""
	}
	return p.Describe()
}

func (p *Process) roots() []Root {
	if p == nil || p.Roots == nil {
		return []Root{}
	}
	return p.Roots
}
