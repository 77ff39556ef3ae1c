// Package conventions holds no code: its tests enforce the conventions of
// STYLE.md that a reviewer would otherwise have to remember (tailscale's
// pkgdoc_test and deptest are the model): one package doc per directory,
// unsafe only in *_unsafe.go files, and import rules for packages that
// must stay plain data.
package conventions
