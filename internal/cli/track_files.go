package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/audit"
)

// Bounds of the per-call file audit: a sandbox's writable dirs are walked
// before and after each call, so a huge tree is not walked in full, and
// only so many written files are hashed.
const (
	maxSnapshotEntries = 20000
	maxFilesPerCall    = 256
	maxHashBytes       = 64 << 20
)

// fileSnapshot is what the writable dirs held before a call.
type fileSnapshot struct {
	files     map[string]fileStamp // host path → stamp
	truncated bool                 // the walk stopped at maxSnapshotEntries
}

type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// snapshotDirs records the regular files under dirs (symlinks are not
// followed).
func snapshotDirs(dirs []rwDir) fileSnapshot {
	s := fileSnapshot{files: map[string]fileStamp{}}
	for _, d := range dirs {
		walkFiles(d.host, func(p string, st fileStamp) bool {
			if len(s.files) >= maxSnapshotEntries {
				s.truncated = true
				return false
			}
			s.files[p] = st
			return true
		})
	}
	return s
}

// walkFiles calls each for every regular file under root until it
// returns false.
func walkFiles(root string, each func(string, fileStamp) bool) {
	n := 0
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if n++; n > maxSnapshotEntries*2 {
			return filepath.SkipAll
		}
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		st := fileStamp{size: info.Size(), mtime: info.ModTime()}
		if sys, ok := info.Sys().(*syscall.Stat_t); ok {
			st.ino = sys.Ino
		}
		if !each(p, st) {
			return filepath.SkipAll
		}
		return nil
	})
}

// changed lists the regular files that are new or different since the
// snapshot, with their sandbox paths, sizes and hashes.
func (s fileSnapshot) changed(dirs []rwDir) []audit.File {
	var out []audit.File
	for _, d := range dirs {
		walkFiles(d.host, func(p string, st fileStamp) bool {
			if old, ok := s.files[p]; ok && old == st {
				return true
			}
			if len(out) >= maxFilesPerCall {
				return false
			}
			rel, err := filepath.Rel(d.host, p)
			if err != nil {
				return true
			}
			f := audit.File{Path: path.Join(d.target, filepath.ToSlash(rel)), Size: st.size}
			f.SHA256 = hashFile(p)
			out = append(out, f)
			return true
		})
	}
	return out
}

// hashFile returns the hex sha256 of a regular file, or "" when it cannot
// be read safely (not regular any more, a symlink swapped in, too big).
func hashFile(p string) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() > maxHashBytes {
		return ""
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxHashBytes)); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
