package cli

import (
	"context"
	"fmt"
	"strings"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/integrity"
	"mcpbox/internal/specconv"
)

const pinHelp = `USAGE
  mcpbox pin [--check] [--config FILE] [--state-dir DIR] [--allow-degraded LAYERS] [SERVER...]

Starts each server of the config (every one, or those named: the others'
packages and images are left alone) in its sandbox, lists its tools,
prompts and resource templates, notes its initialize instructions, runs
the description scanner over them and prints its findings, records the
definitions in the lock file beside the config (mcpbox.lock for
mcpbox.yaml, NAME.lock for NAME.yaml; in the state dir for the embedded
default), replacing that server's earlier pins (it says how many of them
were new, changed or removed). A gateway on the state dir reloads the lock.

--check records nothing: it prints the scanner's findings and how each
definition compares with the lock file ("not yet pinned" for a server or
kind the lock does not have), and exits 1 when there is a finding or a
difference. A server that cannot start is reported, the others are still
scanned, checked or pinned, and the exit status is 1. --allow-degraded
starts them without the isolation layers serve --allow-degraded accepts
(such as cgroups for a user without a delegated cgroup).
`

func (e *env) pin(args []string) int {
	fs := e.newFlagSet("pin", pinHelp)
	cfgPath := fs.String("config", "", "the config `FILE` (default: the embedded default)")
	stateFlag := fs.String("state-dir", "", "the state `DIR` (default: the config's)")
	check := fs.Bool("check", false, "scan and compare only; record nothing")
	var degraded degradedFlag
	fs.Var(&degraded, "allow-degraded", "start the servers even when the isolation `LAYERS` (comma list of seccomp,\nlandlock, cgroups, idmap; bare flag: any) are unavailable, as serve's flag")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	c, base, err := daemon.LoadConfigOrDefault(*cfgPath, defaultConfig, "pin")
	if err != nil {
		e.errorf("pin: %v", err)
		return exitUsage
	}
	daemon.AcceptDegraded(c, degraded.all, degraded.layers)
	names := fs.Args()
	for _, n := range names {
		if c.Server(n) == nil {
			e.errorf("pin: no server %q in the config", n)
			return exitUsage
		}
	}
	if len(names) == 0 {
		for _, s := range c.Servers {
			names = append(names, s.Name)
		}
	}
	dir, err := specconv.StateDir(c, *cfgPath, base, *stateFlag)
	if err != nil {
		e.errorf("pin: %v", err)
		return 1
	}
	lister, err := daemon.NewLister(daemon.ListOptions{Config: c, ConfigPath: *cfgPath, Base: base,
		StateDir: dir, Stderr: e.stderr, Version: version(), NoRecord: *check, Only: fs.Args()})
	if err != nil {
		e.errorf("pin: %v", err)
		return exitFor(err)
	}
	defer lister.Close()
	pins, err := integrity.OpenPins(lister.LockPath())
	if err != nil {
		e.errorf("pin: %v", err)
		return 1
	}
	ctx, cancel := daemon.SignalContext(context.Background())
	defer cancel()
	// A server that cannot start is reported and the others still are:
	// one broken server must not hide what the rest would change.
	defs := map[string]*gateway.Definitions{}
	var failed []string
	for _, name := range names {
		d, err := lister.Definitions(ctx, name)
		if err != nil {
			e.errorf("pin: server %s could not start: %v", name, err)
			failed = append(failed, name)
			continue
		}
		defs[name] = d
	}
	problems := e.printFindings(c, defs)
	if *check {
		for _, d := range lister.Drift() {
			fmt.Fprintln(e.stdout, config.Printable(d))
		}
		problems += len(lister.Drift()) + e.compareWithLock(c, pins, defs, true, "mcpbox pin")
		if len(failed) > 0 {
			e.errorf("pin: not checked: %s (could not start)", strings.Join(failed, ", "))
		}
		if problems > 0 || len(failed) > 0 {
			return 1
		}
		return 0
	}
	if n, err := daemon.RecordAll(e.stdout, c, pins, names, defs); err != nil {
		e.errorf("pin: %v", err)
		return 1
	} else if n > 0 {
		fmt.Fprintf(e.stdout, "lock file: %s\n", pins.Path())
		if err := (admin.Client{StateDir: dir}).Reload(); err == nil {
			fmt.Fprintln(e.stdout, "the running gateway reloaded it")
		}
	}
	if len(failed) > 0 {
		e.errorf("pin: not pinned: %s (could not start)", strings.Join(failed, ", "))
		return 1
	}
	return 0
}

// printFindings prints the scanner's findings and returns their number.
func (e *env) printFindings(c *config.Config, defs map[string]*gateway.Definitions) int {
	findings := daemon.Scan(c, defs)
	for _, f := range findings {
		fmt.Fprintln(e.stdout, config.Printable(fmt.Sprintf("%s: %s [%s, %s] at %s: %s\n    %s", guard.ItemName(f.Server, c.EffectivePrefix(c.Server(f.Server)), f.Kind, f.Key), f.Rule, f.Severity, f.Kind, f.Where, f.Message, f.Excerpt)))
	}
	if len(findings) == 0 {
		fmt.Fprintln(e.stdout, "scanner: no findings")
	}
	return len(findings)
}

// compareWithLock prints how the definitions differ from the lock file and
// returns their number; unless check, the caller pins them now, else cmd.
func (e *env) compareWithLock(c *config.Config, pins *integrity.Pins, defs map[string]*gateway.Definitions, check bool, cmd string) int {
	n := 0
	for _, cmp := range daemon.Compare(c, pins, defs) {
		if cmp.Err != nil {
			e.errorf("pin: %s: %v", cmp.Server, cmp.Err)
			n++
			continue
		}
		prefix := c.EffectivePrefix(c.Server(cmp.Server))
		for _, ch := range cmp.Changed {
			// The server chose the definition: see admin.WriteChange.
			fmt.Fprintln(e.stdout, config.Printable(fmt.Sprintf("%s %s %s\n%s", ch.Status, ch.Kind, guard.ItemName(cmp.Server, prefix, ch.Kind, ch.Key), integrity.Diff(ch))))
		}
		// Nothing of this kind in the lock: one line, not a diff
		// of every definition against nothing.
		if n += len(cmp.Changed) + cmp.NotPinned; cmp.NotPinned > 0 {
			how := "pinned now"
			if check {
				how = cmd + " " + cmp.Server + " records them"
			}
			fmt.Fprintf(e.stdout, "not yet pinned: %s of %s (%s)\n", definitionCount(cmp.NotPinned, cmp.Kind), cmp.Server, how)
		}
	}
	if n == 0 {
		fmt.Fprintln(e.stdout, "lock file: every definition matches")
	}
	return n
}

// definitionCount is "25 tools", "1 prompt", "instructions".
func definitionCount(n int, kind string) string {
	if kind == integrity.KindInstructions {
		return "instructions"
	}
	return daemon.Plural(n, kind)
}
