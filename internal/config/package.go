package config

import "strings"

// A package server runs a registry package instead of a command:
//
//	package: npm:@modelcontextprotocol/server-memory@2026.1.0
//	args: [--flag]
//
// Package is "npm:NAME[@VERSION]" or "pypi:NAME[@VERSION]" (a version, a
// range or a dist-tag; resolved once and pinned in mcpbox.lock); Args go
// to the package's bin. Package is exclusive with Command, URL and
// Builtin. The package is installed outside the sandbox (internal/
// pkginstall) and the server sandbox runs it read-only with no network.
// A Command of the form `npx -y PKG ...`, `uvx PKG ...` and the other
// runners is recognised by the daemon as the same thing; the config keeps
// what the user wrote.

// isPackage reports whether s names a package (even an empty one).
func isPackage(s *Server) bool { return s.Package != "" || s.Meta.Has("package") }

// checkPackage checks package and args: the value's shape (the daemon
// parses it fully), args only beside a package, no group placement.
func checkPackage(r *collector, s *Server, p string) {
	// args without package or image: checkImage.
	if !isPackage(s) {
		return
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			r.errorf(s.Meta.Elem("args", i), "%s.args[%d]: must not contain NUL", p, i)
		}
	}
	at := s.Meta.At("package")
	eco, name, ok := strings.Cut(s.Package, ":")
	switch {
	case !ok || name == "" || strings.HasPrefix(name, "@") && !strings.Contains(name, "/"):
		r.errorf(at, "%s.package: %q: want npm:NAME[@VERSION] or pypi:NAME[@VERSION]", p, s.Package)
	case eco != "npm" && eco != "pypi":
		r.errorf(at, "%s.package: unknown ecosystem %q (want npm or pypi)", p, eco)
	case strings.ContainsAny(s.Package, "\t\n\r\x00"):
		r.errorf(at, "%s.package: %q must not contain spaces", p, s.Package)
	case strings.Contains(unspaced(eco, name), " "):
		r.errorf(at, "%s.package: %q must not contain spaces", p, s.Package)
	}
	if strings.HasPrefix(s.Placement, PlacementGroup) {
		r.errorf(s.Meta.At("placement"), "%s.placement: a package server runs in a sandbox of its own (isolated)", p)
	}
}

// unspaced is the part of a package value that must not hold a space: all
// of it, except an npm version range, which npm writes with spaces
// (">=1.2.0 <2", "1.2 - 1.4", "1.x || 2.x"); its blank is an error.
func unspaced(eco, name string) string {
	i := strings.LastIndex(name, "@")
	if eco != "npm" || i <= 0 {
		return name
	}
	if strings.TrimSpace(name[i+1:]) == "" {
		return " " // "pkg@ ": a blank version
	}
	return name[:i]
}
