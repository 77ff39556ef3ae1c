// Package conventions holds no code: its tests enforce the conventions of
// STYLE.md that a reviewer would otherwise have to remember (tailscale's
// pkgdoc_test and deptest are the model): one package doc per directory,
// unsafe only in *_unsafe.go files, import rules for packages that must
// stay plain data, the layer table (no package imports up; the table in
// docs/architecture.md matches), a thin internal/cli (TestCLIIsWiring),
// the docs' own checks (every config key documented, examples that
// parse), and the macOS cross build of cmd/mcpbox (TestCrossBuild).
package conventions
