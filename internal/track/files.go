package track

import (
	"path"

	"mcpbox/internal/audit"
	"mcpbox/internal/workspace"
)

// Bounds of the per-call file audit: a sandbox's writable dirs are walked
// before and after each call, so a huge tree is not walked in full, and
// only so many written files (and bytes) are hashed.
const (
	maxSnapshotEntries = 20000
	maxFilesPerCall    = 256
	maxHashBytes       = 64 << 20  // one file
	maxHashTotal       = 256 << 20 // all files of one call
)

// fileSnapshot is what the writable dirs held before a call.
type fileSnapshot struct {
	files     map[string]workspace.FileInfo // host dir + "\x00" + rel → file
	truncated bool                          // the walk stopped at maxSnapshotEntries
}

// snapshotDirs records the regular files under dirs. The walk is the
// workspace package's: it never follows a symlink, even one the sandbox
// swaps in while it runs.
func snapshotDirs(dirs []Dir) fileSnapshot {
	s := fileSnapshot{files: map[string]workspace.FileInfo{}}
	for _, d := range dirs {
		_ = workspace.Files(d.Host, func(fi workspace.FileInfo) bool {
			if len(s.files) >= maxSnapshotEntries {
				s.truncated = true
				return false
			}
			s.files[d.Host+"\x00"+fi.Rel] = fi
			return true
		})
	}
	return s
}

// changed lists the regular files that are new or different since the
// snapshot, with their sandbox paths, sizes and hashes.
func (s fileSnapshot) changed(dirs []Dir) []audit.File {
	var out []audit.File
	var hashed int64
	for _, d := range dirs {
		_ = workspace.Files(d.Host, func(fi workspace.FileInfo) bool {
			if old, ok := s.files[d.Host+"\x00"+fi.Rel]; ok && old == fi {
				return true
			}
			if len(out) >= maxFilesPerCall {
				return false
			}
			f := audit.File{Path: path.Join(d.Target, fi.Rel), Size: fi.Size}
			if hashed+fi.Size <= maxHashTotal {
				f.SHA256, _ = workspace.HashFile(d.Host, fi, maxHashBytes)
				hashed += fi.Size
			}
			out = append(out, f)
			return true
		})
	}
	return out
}
