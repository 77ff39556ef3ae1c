package pkginstall

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// sanitizeTree makes a built tree fit for sharing before it enters the
// store: install scripts may have left setuid, setgid or sticky bits and
// group- or world-writable modes, which are cleared; a device node, named
// pipe or socket refuses the install (no package needs one, and a socket
// in a mounted tree would be a way out of a later sandbox). Symlinks are
// left alone and never followed: a server sandbox resolves them in its
// own view.
func sanitizeTree(tree string) error {
	return filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		t := d.Type()
		switch {
		case t&fs.ModeSymlink != 0:
			return nil
		case t.IsDir(), t.IsRegular():
		default:
			rel, _ := filepath.Rel(tree, p)
			return fmt.Errorf("install left %s, a %s: refused", rel, typeName(t))
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode()
		clean := mode.Perm() &^ 0o022
		if clean != mode.Perm() || mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			return os.Chmod(p, clean)
		}
		return nil
	})
}

func typeName(t fs.FileMode) string {
	switch {
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
