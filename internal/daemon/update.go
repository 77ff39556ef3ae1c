package daemon

import (
	"context"
	"fmt"
	"io"
	"regexp"

	"mcpbox/internal/config"
	"mcpbox/internal/guard"
	"mcpbox/internal/integrity"
	"mcpbox/internal/pkginstall"
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
	if !o.Check && ch.New != ch.Old {
		if err := integrity.WritePackagePin(lockPath, o.Server, ch.New); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// String shows the change on one line: "SERVER: OLD -> NEW".
func (ch PackageChange) String() string {
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
