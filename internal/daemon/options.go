package daemon

import (
	"io"
	"log/slog"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

// DefaultHTTPAddr is where serve listens when nothing says otherwise.
const DefaultHTTPAddr = "127.0.0.1:8765"

// Options are what the command line chose for one serve. Config is
// required; every other zero value is documented with its field.
type Options struct {
	// Config is the loaded and validated config. Run changes the
	// required layers of its servers when AllowDegraded accepts some.
	Config *config.Config
	// ConfigPath is the config file; "" for the embedded default.
	ConfigPath string
	// Source is the config's text, for the positions of policy errors;
	// nil: read from ConfigPath.
	Source []byte
	// Base is the directory the config's relative paths lead from.
	Base string
	// StateDir overrides the config's state dir (--state-dir); "": the
	// config's state_dir, or the project's (specconv.StateDir).
	StateDir string
	// Snapshot seeds the new workspaces of the snapshot's server
	// (--from-snapshot); "": none.
	Snapshot string

	// Stdio serves one MCP session on Stdin and Stdout; HTTPAddr serves
	// Streamable HTTP on HOST:PORT. With neither: stdio when Stdin is a
	// client's stream (a pipe, a socket, a file, or any reader that is
	// no *os.File), else HTTP on the config's listen.http.addr, or
	// DefaultHTTPAddr.
	Stdio    bool
	HTTPAddr string
	// NoAuth serves HTTP without a bearer token: refused with clients
	// and on a non-loopback address.
	NoAuth bool
	// MetricsAddr, if not "", serves /metrics, /healthz and /readyz
	// without credentials on this loopback HOST:PORT (--metrics-addr).
	MetricsAddr string
	// AllowAllDegraded accepts losing any isolation layer, AllowDegraded
	// the listed ones (--allow-degraded): see AcceptDegraded.
	AllowAllDegraded bool
	AllowDegraded    []sandbox.Layer

	// Strict ends serve at its start when any server cannot be set up
	// (its package does not install, its image does not pull, a warning
	// of the start says it cannot start on this machine); false:
	// serve runs the others, and that server is unavailable until a new
	// session's retry sets it up (setup.go). Serve ends either way when
	// no server can be set up.
	Strict bool

	// Stdin and Stdout carry the stdio session.
	Stdin  io.Reader
	Stdout io.Writer
	// Stderr gets the log, redacted, and the servers' stderr; nil:
	// discarded.
	Stderr io.Writer
	// LogLevel is the log's threshold; zero: info.
	LogLevel slog.Level
	// Version is what the gateway tells clients it is.
	Version string

	// Summary, if non-nil, is given the config's warnings and what the
	// lock file pins, once the guard runs and before any server starts.
	Summary func(Summary)
	// Unavailable, if non-nil, is told each server serve could not set
	// up or whose package still installs, once the gateway runs with the
	// others; nil: the log says it.
	Unavailable func(Unavailable)
	// NoAuthWarning, if non-nil, is called when HTTP on addr is to go
	// without a token (NoAuth).
	NoAuthWarning func(addr string)
	// Listening, if non-nil, is called once HTTP listens, before the
	// first request is served.
	Listening func(Listening)
}

// Listening is what a person needs to connect to serve's HTTP endpoint.
type Listening struct {
	URL string
	// Token is the state dir's bearer token that guards the endpoint;
	// "" when the config's clients do, or with NoAuth.
	Token string
	// StateDir holds the token file (bearer.Token.Path).
	StateDir string
}

// Unavailable is a server serve runs without: it could not be set up.
type Unavailable struct {
	Server string
	Reason string // one line, redacted
	// Installing: not a fault, its package still installs in the
	// background; it joins the sessions once installed.
	Installing bool
	Retry      string // when it is set up again: "a new session retries it", ...
}
