package daemon

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"mcpbox/internal/config"
	"mcpbox/internal/integrity"
	"mcpbox/internal/pkginstall"
	"mcpbox/internal/specconv"
)

func init() {
	updaters = append(updaters, updater{kind: "package", match: isPackageServer, check: checkPackageUpdate})
}

// isPackageServer reports whether s runs a registry package: package:,
// or a command a package runner (npx, uvx, ...) runs.
func isPackageServer(s *config.Server) bool {
	if s.Package != "" {
		return true
	}
	if s.Command == nil {
		return false
	}
	_, _, ok, _ := pkginstall.FromCommand(s.Command)
	return ok
}

// exactRE is a plain version (npm semver or a PyPI release), which the
// store would answer without asking the registry.
var exactRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*([-+.]?[0-9A-Za-z.+-]+)?$`) })

// pinText is a package pin as Update shows and compares it: the version,
// the archive's integrity and the dependencies' lockfile hash.
func pinText(p integrity.PackagePin) string {
	return fmt.Sprintf("%s (%s, lockfile %s)", p.Version, p.Integrity, p.Lockfile)
}

// checkPackageUpdate re-resolves s's package against its registry,
// ignoring its pin and the store, installs what it resolves to and, when
// that is not the pinned package (another version, other bytes for the
// same version, other dependencies), lists the server's definitions run
// from it. Update.Pin pins it, with its lockfile.
func checkPackageUpdate(ctx context.Context, o ListOptions, s *config.Server) (*Update, error) {
	pss, err := PackageServers(&config.Config{File: o.Config.File, Servers: []*config.Server{s}})
	if err != nil {
		return nil, err
	}
	if len(pss) != 1 {
		return nil, configError(fmt.Errorf("server %s is not a package server", s.Name))
	}
	ps := pss[0]
	lockPath, err := o.lockPath()
	if err != nil {
		return nil, err
	}
	old, pinned, err := integrity.ReadPackagePin(lockPath, s.Name)
	if err != nil {
		return nil, err
	}
	u := &Update{Server: s.Name, Kind: "package", What: ps.Source.String()}
	if pinned && old.Source == ps.Source.String() {
		u.Old = pinText(old)
	}
	po := packageOptions{c: o.Config, base: o.Base, stateDir: o.StateDir, lockPath: lockPath, progress: o.Stderr}
	in, err := po.installer(s)
	if err != nil {
		return nil, err
	}
	// An exact version as a range, so that the registry is asked even
	// when the store holds the version (the registry may have new bytes).
	src := ps.Source
	if exactRE().MatchString(src.Version) {
		src.Version = map[pkginstall.Ecosystem]string{pkginstall.NPM: "=", pkginstall.PyPI: "=="}[src.Ecosystem] + src.Version
	}
	pkg, err := in.Install(ctx, src, nil)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	np := lockPin(pkg.Pin, ps.Source)
	if u.New = pinText(np); !u.Changed() {
		return u, nil
	}
	o.packages = map[string]specconv.Package{s.Name: {Dir: pkg.Dir,
		Args: pkg.Command(specconv.PackageTarget, ps.Args), Env: pkg.Env(specconv.PackageTarget)}}
	if u.Definitions, err = definitionsWith(ctx, o, s, nil); err != nil {
		return nil, fmt.Errorf("server %s: starting it from %s: %w", s.Name, np, err)
	}
	u.pin = func() error { return keepPin(lockPath, s.Name, np, pkg) }
	return u, nil
}
