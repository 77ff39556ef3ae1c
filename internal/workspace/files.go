//go:build linux

package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"

	"golang.org/x/sys/unix"
)

// errStop ends a Files walk early.
var errStop = errors.New("stop")

// Files calls fn for each regular file beneath root, in sorted order,
// until fn returns false. Like everything here it never follows a
// symlink: each directory is opened beneath its parent, so a sandbox that
// swaps a directory for a link while the walk runs cannot lead it out.
func Files(root string, fn func(FileInfo) bool) error {
	rfd, err := openRoot(root)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	err = walk(rfd, "", 0, func(n *node) error {
		if n.typ() != unix.S_IFREG {
			return nil
		}
		fi := FileInfo{Rel: n.rel, Size: n.st.Size, Ino: n.st.Ino, MtimeNS: n.st.Mtim.Nano(), Dev: n.st.Dev}
		if !fn(fi) {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) || errors.Is(err, ErrLimit) {
		return nil // stopped, or too deep to go on: what was met is reported
	}
	return err
}

// HashFile returns the hex sha256 of the regular file rel beneath root,
// which must still be the file fi describes; "" when it is larger than
// max or is not that regular file any more.
func HashFile(root string, fi FileInfo, max int64) (string, error) {
	if fi.Size > max {
		return "", nil
	}
	rfd, err := openRoot(root)
	if err != nil {
		return "", err
	}
	defer unix.Close(rfd)
	dir, name := splitRel(fi.Rel)
	dfd, err := openDirBeneath(rfd, dir, false, 0)
	if err != nil {
		return "", nil
	}
	defer unix.Close(dfd)
	want := unix.Stat_t{Dev: fi.Dev, Ino: fi.Ino}
	f, _, err := openFileAt(dfd, name, &want)
	if err != nil {
		return "", nil
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, max)); err != nil {
		return "", nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
