package sandbox

import (
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"mcpbox/internal/sandbox/initproc"
)

// overlayConfig describes the overlay whose lower layer is the vetted
// input bind lower. The layer dir is vetted like a bind source, and
// idmapped as host root.
func (sb *Sandbox) overlayConfig(lower bindSpec, idmap **idmapUserns, fds *[]int) (*overlaySpec, error) {
	o := sb.spec.InputOverlay
	root, upRel, workRel := layerRoot(o.Upper, o.Work)
	layers, err := sb.vetBind(Mount{Source: root, Target: stageLayers, Writable: true}, false, idmap, fds)
	if err != nil {
		return nil, err
	}
	upper, err := vetLayerDir(o.Upper, upRel)
	if err != nil {
		return nil, err
	}
	work, err := vetLayerDir(o.Work, workRel)
	if err != nil {
		return nil, err
	}
	if upper.Dev != work.Dev {
		return nil, overlayStartError(fmt.Errorf("upper dir %s and work dir %s are on different filesystems", o.Upper, o.Work))
	}
	lower.Target, lower.Writable = stageLower, false
	layers.Exec = lower.Exec
	return &overlaySpec{Lower: lower, Layers: layers, Upper: upper, Work: work, Exec: lower.Exec}, nil
}

// vetLayerDir records the directory at host path p, which lies at rel
// below the layer dir.
func vetLayerDir(p, rel string) (layerDir, error) {
	fd, err := openNoSymlinks(p)
	if err != nil {
		return layerDir{}, overlayStartError(fmt.Errorf("opening %s (must exist and contain no symlinks): %w", p, err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return layerDir{}, overlayStartError(fmt.Errorf("checking %s: %w", p, err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return layerDir{}, overlayStartError(fmt.Errorf("%s is not a directory", p))
	}
	return layerDir{Rel: rel, Dev: st.Dev, Ino: st.Ino}, nil
}

func overlayStartError(err error) *StartError {
	return &StartError{Layer: LayerOverlay, Code: exitSetup, Err: initproc.OverlayError(err)}
}

// overlayCaps are the capabilities the init adds when it mounts the input
// overlay. Overlayfs does every upper-layer operation (copy-up, whiteouts,
// its work dir, which it creates with mode 0) with the mounter's
// credentials, whatever the caller's. They count in the sandbox's user
// namespace only, which maps one uid: they reach no file the init could
// not chmod anyway. The workload never has them.
var overlayCaps = []uintptr{unix.CAP_DAC_OVERRIDE, unix.CAP_CHOWN, unix.CAP_FOWNER, unix.CAP_FSETID}

// stripSetID clears the setuid and setgid bits of every non-directory in
// the upper dir once the sandbox is gone. Seccomp refuses the bits in any
// mode the workload sets, and the kernel clears them when the workload
// writes to a file, but a copy-up alone (touch, chown to itself) copies a
// lower file's bits into the upper dir, a host directory where the
// sandbox's nosuid flag no longer holds. Nothing writes to the upper dir
// any more; symlinks are not followed.
func stripSetID(upper string) error {
	return filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", p, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("checking %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
			return nil
		}
		if err := unix.Fchmod(fd, st.Mode&^(unix.S_IFMT|unix.S_ISUID|unix.S_ISGID)); err != nil {
			return fmt.Errorf("clearing the setuid and setgid bits of %s: %w", p, err)
		}
		return nil
	})
}
