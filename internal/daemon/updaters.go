package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
)

// Update is what re-resolving one server's pinned source (`mcpbox
// update SERVER`) found: the source as pinned and as it resolves now,
// and, when they differ, the server's definitions run from the new one.
type Update struct {
	Server string
	Kind   string // what the source is: "image"
	What   string // the source as the config names it, e.g. the image reference
	// Old is the pin ("" when there is none), New what the source
	// resolves to now: digests for an image.
	Old, New string
	// Definitions are the server's tools, prompts, templates and
	// instructions when run from New; nil when New is Old.
	Definitions *gateway.Definitions
	// Pins is the lock file's, for comparing the definitions with.
	Pins *integrity.Pins
	// pin records New in the lock file.
	pin func() error
}

// Changed reports whether the source resolves to something other than
// its pin.
func (u *Update) Changed() bool { return u.Old != u.New }

// Pin records New as the server's pin in the lock file, and the
// definitions it brings in pins, as `mcpbox pin` does.
func (u *Update) Pin() error {
	if u.pin != nil {
		if err := u.pin(); err != nil {
			return err
		}
	}
	if u.Definitions == nil {
		return nil
	}
	return Record(u.Pins, u.Server, u.Definitions)
}

// updater re-resolves the sources of one kind of server.
type updater struct {
	kind  string
	match func(*config.Server) bool
	check func(ctx context.Context, o ListOptions, s *config.Server) (*Update, error)
}

// updaters, one per kind of pinned source; each kind adds its own from
// its file (an init function), so kinds plug in without touching this one.
var updaters []updater

// CheckUpdate re-resolves the pinned source of server (the config's
// image or package) and, when it changed, starts the server from the new
// source to read its definitions. It pins nothing: Update.Pin does.
func CheckUpdate(ctx context.Context, o ListOptions, server string) (*Update, error) {
	s := o.Config.Server(server)
	if s == nil {
		return nil, configError(fmt.Errorf("no server %q in the config", server))
	}
	if err := checkPlatform(&config.Config{Servers: []*config.Server{s}, Backend: o.Config.Backend}, goos); err != nil {
		return nil, err
	}
	lockPath, err := o.lockPath()
	if err != nil {
		return nil, err
	}
	pins, err := integrity.OpenPins(lockPath)
	if err != nil {
		return nil, err
	}
	var kinds []string
	for _, u := range updaters {
		if !u.match(s) {
			kinds = append(kinds, u.kind)
			continue
		}
		up, err := u.check(ctx, o, s)
		if up != nil {
			up.Pins = pins
		}
		return up, err
	}
	return nil, configError(fmt.Errorf("server %s has nothing to update: only servers with a pinned source (%v) do", server, kinds))
}

// UpdateUsage is `mcpbox update`'s error for a command line that names
// no server or several: it names the config's servers that one can
// update, those with a pinned source.
func UpdateUsage(c *config.Config) error {
	var names, kinds []string
	for _, u := range updaters {
		kinds = append(kinds, u.kind)
	}
	for _, s := range c.Servers {
		if slices.ContainsFunc(updaters, func(u updater) bool { return u.match(s) }) {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("name one SERVER (mcpbox update --help); this config has no server with a source to re-resolve (%s)", strings.Join(kinds, " or "))
	}
	return fmt.Errorf("name one SERVER of those with a source to re-resolve (an image or a package): %s (mcpbox update --help)", strings.Join(names, ", "))
}

// definitionsWith starts server s alone, from its pulled image when img
// names it (see wiring.pulled), and reads its definitions.
func definitionsWith(ctx context.Context, o ListOptions, s *config.Server, w func(*wiring)) (*gateway.Definitions, error) {
	c := *o.Config
	c.Servers = []*config.Server{s}
	o.Config = &c
	l, err := newLister(o, w)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Definitions(ctx, s.Name)
}
