package cli

import (
	"context"
	_ "embed"
	"encoding/json"

	"mcpbox/internal/builtin"
	"mcpbox/internal/daemon"
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
	ctx, cancel := daemon.SignalContext(context.Background())
	defer cancel()
	err := builtin.ServeStdio(ctx, o, e.stdin, e.stdout)
	if err != nil && ctx.Err() == nil {
		e.errorf("__builtin: %v", err)
		return 1
	}
	return 0
}
