package specconv

import (
	"fmt"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

// PackageTarget is where a package server's installed tree is mounted in
// its sandbox.
const PackageTarget = "/opt/mcpbox/pkg"

// Package is how a package server (config `package:`, or a recognised
// npx/uvx command) runs once installed: the caller (the daemon) installs
// it with internal/pkginstall and gives Server the result in
// Options.Packages.
type Package struct {
	// Dir is the installed tree in the store on the host; it is mounted
	// read-only with exec allowed at PackageTarget. It lies in the state
	// dir, which no config mount may show: this mount is the exception,
	// read-only, and holds nothing secret.
	Dir string
	// Args is the argv in the sandbox (the host's node or python3 on the
	// bin under PackageTarget, then the server's args).
	Args []string
	// Env is what the interpreter needs (PYTHONPATH for PyPI).
	Env []string
}

// packageSpec runs the installed package p in spec in place of a command.
// The spec's network is what the server's own egress config says: none by
// default.
func packageSpec(s *config.Server, o Options, spec *sandbox.Spec) error {
	p, ok := o.Packages[s.Name]
	if !ok {
		if s.Package != "" {
			return fmt.Errorf("server %s: package %s is not installed", s.Name, s.Package)
		}
		return nil
	}
	if p.Dir == "" || len(p.Args) == 0 {
		return fmt.Errorf("server %s: package has no installed tree or command", s.Name)
	}
	spec.Args = p.Args
	spec.Env = append(spec.Env, p.Env...)
	spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: p.Dir, Target: PackageTarget, Exec: true, Internal: true})
	return nil
}

// AllowedDegraded is the isolation layers server s's sandboxes may lose
// on this host, for the sandboxes that install its package.
func AllowedDegraded(c *config.Config, s *config.Server) []sandbox.Layer {
	var spec sandbox.Spec
	requireLayers(c, s, &spec)
	return spec.AllowDegraded
}
