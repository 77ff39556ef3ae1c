package cli

import (
	"cmp"
	"context"
	"fmt"

	"mcpbox/internal/daemon"
	"mcpbox/internal/gateway"
	"mcpbox/internal/specconv"
)

const updateHelp = `USAGE
  mcpbox update [--check] [--config FILE] [--state-dir DIR] [--allow-degraded LAYERS] SERVER

Re-resolves SERVER's pinned image or package (package:, npx, uvx, ...); when
it moved, starts the server from the new one, shows the digests (for a
package: version, archive and lockfile hashes), findings and definition
diffs, then pins them (--check: pins nothing and exits 1).
--allow-degraded starts it (and its install) without the isolation
layers serve --allow-degraded accepts, as pin does.
`

func (e *env) update(args []string) int {
	fs := e.newFlagSet("update", updateHelp)
	cfgPath := fs.String("config", "", "the config `FILE` (default: the embedded default)")
	stateFlag := fs.String("state-dir", "", "the state `DIR` (default: the config's)")
	check := fs.Bool("check", false, "show the change; pin nothing")
	var degraded degradedFlag
	fs.Var(&degraded, "allow-degraded", "start the server even when the isolation `LAYERS` (comma list of seccomp,\nlandlock, cgroups, idmap; bare flag: any) are unavailable, as serve's flag")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	c, base, err := daemon.LoadConfigOrDefault(*cfgPath, defaultConfig, "update")
	if err == nil && fs.NArg() != 1 {
		err = daemon.UpdateUsage(c)
	}
	if err != nil {
		e.errorf("update: %v", err)
		return exitUsage
	}
	daemon.AcceptDegraded(c, degraded.all, degraded.layers)
	ctx, cancel := daemon.SignalContext(context.Background())
	defer cancel()
	dir, err := specconv.StateDir(c, *cfgPath, base, *stateFlag)
	var u *daemon.Update
	if err == nil {
		u, err = daemon.CheckUpdate(ctx, daemon.ListOptions{Config: c, ConfigPath: *cfgPath, Base: base, StateDir: dir, Stderr: e.stderr, Version: version(), NoRecord: *check}, fs.Arg(0))
	}
	if err == nil && !u.Changed() {
		fmt.Fprintf(e.stdout, "%s: %s %s is up to date (%s)\n", u.Server, u.Kind, u.What, u.New)
		return 0
	} else if err == nil {
		fmt.Fprintf(e.stdout, "%s: %s %s: %s -> %s\n", u.Server, u.Kind, u.What, cmp.Or(u.Old, "(not pinned)"), u.New)
		defs := map[string]*gateway.Definitions{u.Server: u.Definitions}
		if e.printFindings(c, defs); e.compareWithLock(c, u.Pins, defs, *check, "mcpbox update") >= 0 && *check {
			return 1
		}
		err = u.Pin()
	}
	if err != nil {
		e.errorf("update: %v", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "pinned %s: %s %s at %s, and its definitions, in %s\n", u.Server, u.Kind, u.What, u.New, u.Pins.Path())
	return 0
}
