package daemon

// Isolation layers a serve config requires that this host lacks: accepted
// with --allow-degraded, or refused before serving.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

// AcceptDegraded drops the layers accepted (all, or those listed) from
// every local server's required layers: the flag form of
// sandbox.require.
func AcceptDegraded(c *config.Config, all bool, layers []sandbox.Layer) {
	if !all && len(layers) == 0 {
		return
	}
	for _, s := range c.Servers {
		if s.URL != "" {
			continue
		}
		req := []string{}
		for _, l := range c.RequiredLayers(s) {
			if !all && !slices.Contains(layers, sandbox.Layer(l)) {
				req = append(req, l)
			}
		}
		s.Sandbox.Require = req
	}
}

// ImportNotes are what `mcpbox import` says about the host it runs on
// for the imported config c: that serve will refuse its servers here
// until this user's sandboxes can get cgroups (checkCgroups), and how to
// start it, since a client that launches serve shows only that the
// connection closed.
func ImportNotes(c *config.Config) []string {
	var ce *CgroupsError
	if !errors.As(checkCgroups(c), &ce) {
		return nil
	}
	return []string{fmt.Sprintf("%v: serve will exit 1 at once here, and the client will only say the connection closed; "+
		"have the client run mcpbox under systemd-run --user --scope -p Delegate=yes (see mcpbox doctor), or add --allow-degraded=cgroups to its args (no memory or process limits)", ce)}
}

// checkCgroups returns a *CgroupsError for the first local server that
// requires the cgroups layer and cannot have the limits its config gives
// it; nil when every one can.
func checkCgroups(c *config.Config) error {
	groups := map[string]bool{}
	for _, s := range c.Servers {
		if s.URL != "" || c.IsKubernetes(s) || !slices.Contains(c.RequiredLayers(s), string(sandbox.LayerCgroups)) {
			continue
		}
		if g, ok := strings.CutPrefix(s.Placement, config.PlacementGroup); ok {
			if groups[g] {
				continue // a group's sandbox has its first member's policy
			}
			groups[g] = true
		}
		if err := sandbox.CheckCgroups(specconv.Limits(s)); err != nil {
			return &CgroupsError{Server: s.Name, Err: err}
		}
	}
	return nil
}
