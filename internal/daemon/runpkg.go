package daemon

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"mcpbox/internal/config"
	"mcpbox/internal/guard"
	"mcpbox/internal/integrity"
	"mcpbox/internal/pkginstall"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

// runPackage makes `mcpbox run -- npx -y PKG ARGS` (or uvx, ...) run the
// package installed outside the sandbox, as serve does for a config's
// package servers: installed into the state dir's store (o.StateDir, or
// the current dir's project state dir), pinned in that state dir's
// mcpbox.lock under "run:ECOSYSTEM:NAME", and run read-only with the
// spec's network (none unless --allow-host). Other commands are left
// alone.
func runPackage(ctx context.Context, o *ServerOptions) error {
	src, args, ok, err := pkginstall.FromCommand(o.Spec.Args)
	if err != nil {
		return configError(err)
	}
	if !ok {
		return nil
	}
	dir, err := specconv.StateDir(&config.Config{}, "", ".", o.StateDir)
	if err != nil {
		return err
	}
	lockPath, _ := guard.LockPath("", dir) // the state dir's: nothing to start it from
	key := "run:" + string(src.Ecosystem) + ":" + src.Name
	old, pinned, err := integrity.ReadPackagePin(lockPath, key)
	if err != nil {
		return err
	}
	pinned = pinned && old.Source == src.String()
	npm, err := pkginstall.LoadNPMConfig(os.Getenv, ".")
	if err != nil {
		return fmt.Errorf("reading the npm configuration: %w", err)
	}
	pypi, err := pkginstall.LoadPyPIConfig(os.Getenv)
	if err != nil {
		return fmt.Errorf("reading the pip configuration: %w", err)
	}
	in := &pkginstall.Installer{Store: filepath.Join(dir, "packages"), NPM: npm, PyPI: pypi, AllowDegraded: o.Spec.AllowDegraded}
	if o.Stderr != nil {
		in.Progress = func(line string) { fmt.Fprintf(o.Stderr, "mcpbox: %s\n", line) }
	}
	ps := PackageServer{Server: &config.Server{Name: o.Name}, Source: src, Args: args}
	po := packageOptions{trustHint: fmt.Sprintf("remove %q from the packages of %s", key, lockPath)}
	pkg, err := po.install(ctx, in, ps, old, pinned)
	if err != nil {
		return err
	}
	if !pinned {
		if err := integrity.WritePackagePin(lockPath, key, lockPin(pkg.Pin, src)); err != nil {
			return err
		}
	}
	o.Name = path.Base(src.Name) // the server, not npx
	o.Spec.Args = pkg.Command(specconv.PackageTarget, args)
	o.Spec.Env = append(o.Spec.Env, pkg.Env(specconv.PackageTarget)...)
	o.Spec.Mounts = append(o.Spec.Mounts, sandbox.Mount{Source: pkg.Dir, Target: specconv.PackageTarget, Exec: true, Internal: true})
	return nil
}
