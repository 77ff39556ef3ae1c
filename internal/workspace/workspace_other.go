//go:build !linux

package workspace

import "io"

// Seed needs Linux; see the Linux build.
func Seed(dst, template string) error { return ErrUnsupported }

// Snapshot needs Linux; see the Linux build.
func Snapshot(w io.Writer, meta Meta, parts map[string]string) error { return ErrUnsupported }

// ReadMeta needs Linux; see the Linux build.
func ReadMeta(path string) (Meta, error) { return Meta{}, ErrUnsupported }

// Restore needs Linux; see the Linux build.
func Restore(path, part, dst string) error { return ErrUnsupported }

// Export needs Linux; see the Linux build.
func Export(src, dst string, rules ArtifactRules) ([]Exported, []Refused, error) {
	return nil, nil, ErrUnsupported
}

// Diff needs Linux; see the Linux build.
func Diff(w io.Writer, lower, upper string) error { return ErrUnsupported }

// Files needs Linux; see the Linux build.
func Files(root string, fn func(FileInfo) bool) error { return ErrUnsupported }

// HashFile needs Linux; see the Linux build.
func HashFile(root string, fi FileInfo, max int64) (string, error) { return "", ErrUnsupported }
