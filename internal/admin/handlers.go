package admin

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"mcpbox/internal/approval"
	"mcpbox/internal/config"
)

// call is one request being answered.
type call struct {
	req request
	who string  // the peer, for the audit: "cli:uid=N"
	b   Backend // nil before Attach
}

// handler answers one op. early handlers run before Attach (with a nil
// back-end); the others get "still starting" until then.
type handler struct {
	serve func(*Server, *call) (reply, error)
	early bool
}

// handlers is the protocol: one entry per op.
var handlers = map[string]handler{
	opApprovals: {serve: serveApprovals},
	opDecide:    {serve: serveDecide},
	opRevoke:    {serve: serveRevoke},
	opPins:      {serve: servePins},
	opTrust:     {serve: serveTrust},
	opReload:    {serve: serveReload},
	opPS:        {serve: servePS},
	opStats:     {serve: serveStats},
	opPause:     {serve: serveControl},
	opResume:    {serve: serveControl},
	opStop:      {serve: serveControl},
	opSnapshot:  {serve: serveSnapshot},
	opDiff:      {serve: serveDiff},
	opRotate:    {serve: serveRotate, early: true},
	opUI:        {serve: serveUI},
}

func serveApprovals(_ *Server, c *call) (reply, error) {
	pending, remembered := c.b.Approvals()
	return reply{Pending: pending, Remembered: remembered}, nil
}

func serveDecide(_ *Server, c *call) (reply, error) {
	scope := c.req.Scope
	if scope == "" {
		scope = approval.ScopeOnce
	}
	// The request as it waits goes back with the answer: the CLI words
	// the approval of a trust request apart from a call's.
	var decided []approval.Request
	pending, _ := c.b.Approvals()
	for _, p := range pending {
		if p.ID == c.req.ID {
			decided = append(decided, p)
		}
	}
	by := c.who
	if c.req.For != "" {
		by += " for " + c.req.For // the broker cleans and cuts it
	}
	return reply{Pending: decided}, c.b.Decide(c.req.ID, approval.Decision{Allow: c.req.Allow, Scope: scope, By: by, Via: c.req.Via})
}

func serveRevoke(_ *Server, c *call) (reply, error) {
	return reply{}, c.b.Revoke(c.req.ID, c.who)
}

func servePins(_ *Server, c *call) (reply, error) {
	changes, err := c.b.Pins(c.req.Server)
	return reply{Changes: changes}, err
}

func serveTrust(_ *Server, c *call) (reply, error) {
	changes, err := c.b.Trust(c.req.Server, c.req.Key, c.who, c.req.Hashes)
	if err != nil {
		return reply{}, err
	}
	return reply{Changes: changes}, nil
}

func serveReload(_ *Server, c *call) (reply, error) {
	return reply{}, c.b.Reload(c.who)
}

func servePS(_ *Server, c *call) (reply, error) {
	return reply{Sandboxes: c.b.Sandboxes()}, nil
}

func serveStats(*Server, *call) (reply, error) {
	return reply{Goroutines: runtime.NumGoroutine()}, nil
}

func serveControl(_ *Server, c *call) (reply, error) {
	return reply{}, c.b.Control(c.req.Op, c.req.ID, c.who)
}

func serveSnapshot(_ *Server, c *call) (reply, error) {
	return reply{}, c.b.Snapshot(c.req.ID, c.req.Path)
}

func serveDiff(_ *Server, c *call) (reply, error) {
	lower, upper, ok := c.b.Overlay(c.req.ID)
	switch {
	case !ok:
		return reply{}, fmt.Errorf("no sandbox %q (see mcpbox ps)", c.req.ID)
	case upper == "":
		return reply{}, fmt.Errorf("sandbox %s has no input overlay (filesystem.input.mode: overlay)", c.req.ID)
	}
	return reply{Lower: lower, Upper: upper}, nil
}

// serveRotate renews the sandboxes of every server that declares the
// secret. Its checks of the config answer before the gateway runs.
func serveRotate(s *Server, c *call) (reply, error) {
	cfg := s.opts.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	secret := c.req.Secret
	servers := serversWithSecret(cfg, secret)
	if len(servers) == 0 {
		return reply{}, fmt.Errorf("no server has a secret %q", secret)
	}
	for _, name := range servers {
		if sv := cfg.Server(name); strings.HasPrefix(sv.Placement, config.PlacementGroup) {
			return reply{}, fmt.Errorf("server %s is in %s: a group's shared sandbox cannot be renewed for one member's secret; restart serve", name, sv.Placement)
		}
	}
	if c.b == nil {
		return reply{}, errStarting
	}
	r := reply{Servers: servers}
	for _, name := range servers {
		r.Instances += c.b.Refresh(name)
	}
	return r, nil
}

// serversWithSecret names the servers that declare secret (NAME, or
// SERVER/NAME as `mcpbox secrets` lists it).
func serversWithSecret(c *config.Config, secret string) []string {
	server, name, scoped := strings.Cut(secret, "/")
	if !scoped {
		name = secret
	}
	var out []string
	for _, s := range c.Servers {
		if scoped && s.Name != server {
			continue
		}
		for _, sec := range s.Secrets {
			if sec.Name == name && !slices.Contains(out, s.Name) {
				out = append(out, s.Name)
			}
		}
	}
	return out
}
