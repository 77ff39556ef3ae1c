package daemon

import (
	"context"
	"io"
	"log/slog"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
)

// listTimeout bounds starting one server and listing its definitions.
const listTimeout = 2 * time.Minute

// ListOptions are the servers whose definitions a Lister reads (`mcpbox
// pin`). Config and StateDir are required.
type ListOptions struct {
	Config *config.Config
	// ConfigPath is the config file; "" for the embedded default.
	ConfigPath string
	// Base is the directory the config's relative paths lead from.
	Base string
	// StateDir is the state dir, as specconv.StateDir found it.
	StateDir string
	// Stderr gets the log and the servers' stderr; nil: discarded.
	Stderr io.Writer
	// LogLevel is the log's threshold; zero: info.
	LogLevel slog.Level
	// Version is what the gateway tells the servers it is.
	Version string
}

// Lister starts a config's servers, as serve would (with the same
// protected paths) but without a guard, to read their definitions.
type Lister struct {
	gw *gateway.Gateway
}

// NewLister builds the servers' launchers and a gateway over them; no
// server starts yet. A config whose servers cannot be built is a
// *ConfigError.
func NewLister(o ListOptions) (*Lister, error) {
	book := &redact.Book{}
	log := newLogger(o.Stderr, o.LogLevel, book)
	lockPath := guard.DefaultLockPath(o.ConfigPath, o.StateDir)
	w := wiring{
		c: o.Config, log: log, book: book, stderr: o.Stderr,
		opts: specconv.Options{Base: o.Base, StateDir: o.StateDir,
			Protected: specconv.ProtectedFiles(o.Config, o.Base, o.ConfigPath, lockPath)},
	}
	servers, err := w.servers()
	if err != nil {
		return nil, configError(err)
	}
	gw, err := gateway.New(servers, gateway.Options{Logger: log, Version: o.Version,
		Hooks: gateway.Hooks{Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) }}})
	if err != nil {
		return nil, configError(err)
	}
	return &Lister{gw: gw}, nil
}

// Definitions starts server (as the local agent's) and returns its tools,
// prompts, resource templates and instructions, redacted; it gives up
// after two minutes.
func (l *Lister) Definitions(ctx context.Context, server string) (*gateway.Definitions, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	return l.gw.Definitions(ctx, server, gateway.Scope{Agent: gateway.LocalAgent})
}

// Close stops every server the Lister started.
func (l *Lister) Close() { l.gw.Close() }
