package cli

// Isolation layers a serve config requires that this host lacks: accepted
// with --allow-degraded, or refused before serving, with what to do.

import (
	"os"
	"slices"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

// acceptDegraded drops the layers d accepts from every local server's
// required layers: the flag form of sandbox.require.
func acceptDegraded(c *config.Config, d degradedFlag) {
	if !d.all && len(d.layers) == 0 {
		return
	}
	for _, s := range c.Servers {
		if s.URL != "" {
			continue
		}
		req := []string{}
		for _, l := range c.RequiredLayers(s) {
			if !d.all && !slices.Contains(d.layers, sandbox.Layer(l)) {
				req = append(req, l)
			}
		}
		s.Sandbox.Require = req
	}
}

// cgroupsReady checks, before serve serves, that every local server that
// requires the cgroups layer can have the limits its config gives it. If
// one cannot, every sandbox start would fail with a raw mkdir error, so it
// prints what doctor found and what to do, in two lines, and returns
// false.
func (e *env) cgroupsReady(cmd string, c *config.Config, args []string) bool {
	groups := map[string]bool{}
	for _, s := range c.Servers {
		if s.URL != "" || !slices.Contains(c.RequiredLayers(s), string(sandbox.LayerCgroups)) {
			continue
		}
		if g, ok := strings.CutPrefix(s.Placement, config.PlacementGroup); ok {
			if groups[g] {
				continue // a group's sandbox has its first member's policy
			}
			groups[g] = true
		}
		err := sandbox.CheckCgroups(specconv.Limits(s))
		if err == nil {
			continue
		}
		scope := "systemd-run --user --scope -p Delegate=yes"
		if os.Geteuid() == 0 {
			scope = "systemd-run --scope -p Delegate=yes"
		}
		e.errorf("%s: server %s needs cgroups for its resource limits, and doctor found %v", cmd, s.Name, err)
		e.errorf("run it in a cgroup delegated to you: %s %s, or accept no cgroup limits: %s (config: sandbox.require without cgroups)",
			scope, commandLine(cmd, args), commandLine(cmd, slices.Concat(args, []string{"--allow-degraded=cgroups"})))
		return false
	}
	return true
}

// commandLine is "mcpbox CMD ARGS..." as a shell would take it back.
func commandLine(cmd string, args []string) string {
	words := []string{"mcpbox", cmd}
	for _, a := range args {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool { return !isShellSafe(r) }) {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

func isShellSafe(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r)
}
