package daemon

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/integrity"
	"mcpbox/internal/pkginstall"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
)

// UpdateOptions are one `mcpbox update SERVER`. Config, StateDir and
// Server are required.
type UpdateOptions struct {
	Config *config.Config
	// ConfigPath is the config file; "" for the embedded default.
	ConfigPath string
	// Base is the project dir (its .npmrc counts).
	Base     string
	StateDir string
	Server   string
	// Stderr gets the install's progress; nil: none.
	Stderr io.Writer
	// Check shows the change without writing it.
	Check bool
}

// exactRE is a plain version (npm semver or a PyPI release), which the
// store would answer without asking the registry.
var exactRE = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*([-+.]?[0-9A-Za-z.+-]+)?$`)

// UpdatePackage re-resolves the package of server o.Server against its
// registry, ignoring its pin and the store, installs what it resolves to,
// and (unless o.Check) pins that in the lock file. The change is returned
// so that it can be shown: Old is the zero pin when there was none, and
// Old == New when nothing changed. A server that is no package server is
// a *ConfigError.
func UpdatePackage(ctx context.Context, o UpdateOptions) (PackageChange, error) {
	pss, err := PackageServers(o.Config)
	if err != nil {
		return PackageChange{}, err
	}
	var ps *PackageServer
	for i := range pss {
		if pss[i].Server.Name == o.Server {
			ps = &pss[i]
		}
	}
	if ps == nil {
		return PackageChange{}, configError(fmt.Errorf("server %s is not a package server (package:, or a command that npx, uvx, ... runs)", o.Server))
	}
	lockPath := guard.DefaultLockPath(o.ConfigPath, o.StateDir)
	old, _, err := integrity.ReadPackagePin(lockPath, o.Server)
	if err != nil {
		return PackageChange{}, err
	}
	po := packageOptions{c: o.Config, base: o.Base, stateDir: o.StateDir, lockPath: lockPath, progress: o.Stderr}
	in, err := po.installer(ps.Server)
	if err != nil {
		return PackageChange{}, err
	}
	// An exact version as a range, so that the registry is asked even
	// when the store holds the version (the registry may have new bytes).
	src := ps.Source
	if exactRE.MatchString(src.Version) {
		src.Version = map[pkginstall.Ecosystem]string{pkginstall.NPM: "=", pkginstall.PyPI: "=="}[src.Ecosystem] + src.Version
	}
	pkg, err := in.Install(ctx, src, nil)
	if err != nil {
		return PackageChange{}, fmt.Errorf("server %s: %w", o.Server, err)
	}
	ch := PackageChange{Server: o.Server, Old: old, New: lockPin(pkg.Pin, ps.Source)}
	if ch.New != ch.Old {
		run := specconv.Package{Dir: pkg.Dir, Args: pkg.Command(specconv.PackageTarget, ps.Args), Env: pkg.Env(specconv.PackageTarget)}
		ch.Definitions = definitionDiff(ctx, o, ps.Server, lockPath, run)
	}
	if !o.Check && ch.New != ch.Old {
		if err := keepPin(lockPath, o.Server, ch.New, pkg); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// String shows the change: "SERVER: OLD -> NEW" and, below, how the new
// package's definitions compare with the lock's pins.
func (ch PackageChange) String() string {
	if ch.Definitions != "" {
		return ch.line() + "\n" + ch.Definitions
	}
	return ch.line()
}

func (ch PackageChange) line() string {
	switch {
	case ch.Old == (integrity.PackagePin{}):
		return fmt.Sprintf("%s: not pinned -> %s (%s)", ch.Server, ch.New, ch.New.Integrity)
	case ch.Old == ch.New:
		return fmt.Sprintf("%s: %s unchanged", ch.Server, ch.New)
	case ch.Old.Version == ch.New.Version && ch.Old.Integrity != ch.New.Integrity:
		return fmt.Sprintf("%s: %s: the registry serves different bytes: %s -> %s", ch.Server, ch.New, ch.Old.Integrity, ch.New.Integrity)
	case ch.Old.Version == ch.New.Version:
		return fmt.Sprintf("%s: %s: dependencies changed (lockfile %s -> %s)", ch.Server, ch.New, ch.Old.Lockfile, ch.New.Lockfile)
	}
	return fmt.Sprintf("%s: %s -> %s", ch.Server, ch.Old, ch.New)
}

// definitionDiff starts server s on the newly installed package (as the
// local agent, recording nothing) and describes how its tools, prompts,
// templates and instructions compare with the pins in the lock file.
func definitionDiff(ctx context.Context, o UpdateOptions, s *config.Server, lockPath string, run specconv.Package) string {
	c := *o.Config
	c.Servers = []*config.Server{s}
	book := &redact.Book{}
	log := newLogger(nil, 0, book)
	w := wiring{c: &c, log: log, book: book,
		opts: specconv.Options{Base: o.Base, StateDir: o.StateDir, Packages: map[string]specconv.Package{s.Name: run},
			Protected: specconv.ProtectedFiles(&c, o.Base, o.ConfigPath, lockPath)}}
	servers, err := w.servers()
	if err != nil {
		return "tool definitions: not compared: " + err.Error()
	}
	gw, err := gateway.New(servers, gateway.Options{Logger: log, Version: "update",
		Hooks: gateway.Hooks{Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) }}})
	if err != nil {
		return "tool definitions: not compared: " + err.Error()
	}
	defer gw.Close()
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	defs, err := gw.Definitions(ctx, s.Name, gateway.Scope{Agent: gateway.LocalAgent})
	if err != nil {
		return "tool definitions: not compared: the new package did not start: " + err.Error()
	}
	pins, err := integrity.OpenPins(lockPath)
	if err != nil {
		return "tool definitions: not compared: " + err.Error()
	}
	var b strings.Builder
	prefix := c.EffectivePrefix(s)
	for _, cmp := range Compare(&c, pins, map[string]*gateway.Definitions{s.Name: defs}) {
		switch {
		case cmp.Err != nil:
			fmt.Fprintf(&b, "%s: not compared: %v\n", cmp.Kind, cmp.Err)
		case cmp.NotPinned > 0:
			fmt.Fprintf(&b, "%s: none pinned yet (%d offered)\n", cmp.Kind, cmp.NotPinned)
		}
		for _, ch := range cmp.Changed {
			fmt.Fprintf(&b, "%s %s %s\n%s\n", ch.Status, ch.Kind, guard.ItemName(s.Name, prefix, ch.Kind, ch.Key), integrity.Diff(ch))
		}
	}
	if b.Len() == 0 {
		return "tool definitions: no change against mcpbox.lock"
	}
	return "tool definitions against mcpbox.lock (changed ones stay hidden until mcpbox trust):\n" + strings.TrimRight(b.String(), "\n")
}
