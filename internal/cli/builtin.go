package cli

import (
	_ "embed"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/builtin"
	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

// defaultConfig is the embedded default of `mcpbox serve`.
//
//go:embed default.yaml
var defaultConfig []byte

// builtinMain is the hidden `mcpbox __builtin OPTIONS_JSON` command: the
// built-in workspace server, run inside its sandbox over stdio.
func (e *env) builtinMain(args []string) int {
	if len(args) != 1 {
		e.errorf("__builtin: want one argument (the options as JSON)")
		return exitUsage
	}
	var o builtin.Options
	if err := json.Unmarshal([]byte(args[0]), &o); err != nil {
		e.errorf("__builtin: %v", err)
		return exitUsage
	}
	o.Version = Version
	ctx, cancel := signalContext()
	defer cancel()
	err := builtin.NewServer(o).Run(ctx, &mcp.IOTransport{Reader: readCloser{e.stdin}, Writer: nopWriteCloser{e.stdout}})
	if err != nil && ctx.Err() == nil {
		e.errorf("__builtin: %v", err)
		return 1
	}
	return 0
}

// builtinSpec turns spec (the server's sandbox) into one that runs the
// built-in server s: mcpbox's own binary, mounted read-only.
func builtinSpec(s *config.Server, spec *sandbox.Spec) error {
	self, err := selfMount()
	if err != nil {
		return err
	}
	spec.Mounts = append(spec.Mounts, self)
	o := builtin.Options{
		Commands:       builtin.CommandPolicy{Allow: s.Commands.Allow, Deny: s.Commands.Deny, Approve: s.Commands.Approve},
		CommandTimeout: time.Duration(s.Limits.CallTimeout),
		JobLifetime:    time.Duration(s.Commands.JobLifetime),
	}
	if spec.Input != "" || s.Filesystem.Input != nil {
		o.Input = "/workspace/input"
		// An overlaid input is writable in the sandbox; the changes stay
		// in the overlay (mcpbox diff). The output inside the input is
		// covered by the sandbox, and named here for clear errors.
		o.InputWritable = s.Filesystem.Input != nil && s.Filesystem.Input.Mode == config.ModeOverlay
		o.InputHidden = spec.InputMasks()
	}
	if spec.Output != "" || s.Filesystem.Output != nil {
		o.Output = "/workspace/output"
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return err
	}
	spec.Args = []string{selfTarget, "__builtin", string(raw)}
	return nil
}

type readCloser struct {
	r interface{ Read([]byte) (int, error) }
}

func (r readCloser) Read(p []byte) (int, error) { return r.r.Read(p) }
func (readCloser) Close() error                 { return nil }
