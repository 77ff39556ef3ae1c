package cli

import (
	"context"
	"errors"
	"fmt"

	"mcpbox/internal/daemon"
	"mcpbox/internal/specconv"
)

const updateHelp = `USAGE
  mcpbox update [--check] [--config FILE] [--state-dir DIR] SERVER

Re-resolves the package of a package server (package:, or npx/uvx/...)
against its registry, installs it, prints the change (old -> new version,
or new bytes for the same version) and the tool definitions it changes
against mcpbox.lock (changed tools stay hidden until mcpbox trust), then
pins it in mcpbox.lock. --check prints the change and writes nothing.
`

func (e *env) update(args []string) int {
	fs := e.newFlagSet("update", updateHelp)
	cfgPath := fs.String("config", "", "the config `FILE` (default: the embedded default)")
	stateFlag := fs.String("state-dir", "", "the state `DIR` (default: the config's)")
	check := fs.Bool("check", false, "show the change; write nothing")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	c, base, err := loadConfigOrDefault(*cfgPath)
	if err == nil && fs.NArg() != 1 {
		err = errors.New("name one SERVER")
	}
	var dir string
	if err == nil {
		dir, err = specconv.StateDir(c, *cfgPath, base, *stateFlag)
	}
	if err != nil {
		e.errorf("update: %v", err)
		return exitUsage
	}
	ctx, cancel := daemon.SignalContext(context.Background())
	defer cancel()
	ch, err := daemon.UpdatePackage(ctx, daemon.UpdateOptions{Config: c, ConfigPath: *cfgPath, Base: base,
		StateDir: dir, Server: fs.Arg(0), Stderr: e.stderr, Check: *check})
	if err != nil {
		e.errorf("update: %v", err)
		return map[bool]int{true: exitUsage, false: 1}[errors.As(err, new(*daemon.ConfigError))]
	}
	fmt.Fprintln(e.stdout, ch)
	return 0
}
