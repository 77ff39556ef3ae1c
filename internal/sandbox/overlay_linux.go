package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// /workspace/input as an overlay (Spec.InputOverlay). The init attaches
// the input source and the directory holding upper and work at staging
// points of its own root, outside /newroot, and mounts the overlay from
// there; the staging points vanish with the host tree at the final pivot,
// while the overlay keeps private clones of its layers. The workload sees
// the merged tree only: overlayfs resolves nothing outside its layers, and
// a symlink in the lower layer is a symlink in the sandbox's own view.
//
// Ownership: the mount happens in the sandbox's user namespace, so it
// needs "userxattr" (Linux 5.11), and every file the workload creates in
// the upper layer gets its uid: the caller's when unprivileged (the
// sandbox uid maps to it), and, as host root, root's through the same
// idmapping as the output dir (the layer dir is an idmapped mount, Linux
// 5.19 for overlay layers). Whiteouts and copy-ups are made with the
// init's credentials, the same uid. A lower file whose owner has no
// mapping in the sandbox (not the caller's, or as root not root's) cannot
// be copied up: writing to it fails with EOVERFLOW.
//
// The upper dir is a host directory, out of reach of the sandbox's nosuid
// flag: Wait clears any setuid or setgid bit a copy-up carried into it
// (stripSetID).
const (
	stageLower  = "/overlay/lower"
	stageLayers = "/overlay/layers"
)

// overlaySpec is the input overlay as the init mounts it.
type overlaySpec struct {
	Lower  bindSpec `json:"lower"`  // the input source, staged read-only
	Layers bindSpec `json:"layers"` // the deepest dir holding upper and work
	Upper  layerDir `json:"upper"`
	Work   layerDir `json:"work"`
	Exec   bool     `json:"exec,omitempty"`
}

// layerDir is upper or work: its path below Layers and the file the host
// vetted there.
type layerDir struct {
	Rel string `json:"rel"`
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// overlayError is a failure to set up the input overlay; its StartError
// names LayerOverlay.
type overlayError struct{ err error }

func (e *overlayError) Error() string { return "mounting the input overlay: " + e.err.Error() }
func (e *overlayError) Unwrap() error { return e.err }

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
	return &StartError{Layer: LayerOverlay, Code: exitSetup, Err: &overlayError{err}}
}

// mountOverlay mounts the input overlay, if the config has one. It runs
// in the init after the first pivot: "/" is the staging tmpfs.
func mountOverlay(c *initConfig, fds []int) error {
	o := c.Overlay
	if o == nil {
		return nil
	}
	if err := stageOverlay(o, fds); err != nil {
		return &overlayError{err}
	}
	target := newRoot + InputDir
	if err := mkTarget(target, true); err != nil {
		return &overlayError{fmt.Errorf("creating mount point %s: %w", InputDir, err)}
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !o.Exec {
		flags |= unix.MS_NOEXEC
	}
	// userxattr: the only way in a user namespace; it also turns off
	// redirect_dir and metacopy, whose trusted xattrs the upper would
	// otherwise carry. No index: nothing here needs hard-link identity
	// across copy-up, and it would tie the upper to this lower for good.
	data := "lowerdir=" + stageLower + ",upperdir=" + stageLayers + "/" + o.Upper.Rel +
		",workdir=" + stageLayers + "/" + o.Work.Rel + ",userxattr,index=off"
	if err := mount("overlay", target, "overlay", flags, data); err != nil {
		return &overlayError{err}
	}
	return checkWritable(target)
}

// checkWritable fails if the overlay at target came up read-only: when
// overlayfs cannot use its work dir, it warns in the kernel log and mounts
// read-only rather than failing, and a workload that expects to write must
// not start on that.
func checkWritable(target string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return &overlayError{fmt.Errorf("checking %s: %w", InputDir, err)}
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return &overlayError{errors.New("the kernel mounted it read-only: the work dir is unusable (not writable by the sandbox's uid?)")}
	}
	return nil
}

// stageOverlay attaches the lower layer read-only and the layer dir
// writable at their staging points, and checks that upper and work are
// still the directories the host vetted.
func stageOverlay(o *overlaySpec, fds []int) error {
	for _, s := range []struct {
		b      bindSpec
		target string
	}{{o.Lower, stageLower}, {o.Layers, stageLayers}} {
		if err := os.MkdirAll(s.target, 0o700); err != nil {
			return err
		}
		if err := attachBind(s.b, s.target, fds); err != nil {
			return err
		}
	}
	for _, d := range []layerDir{o.Upper, o.Work} {
		if err := checkLayerDir(d); err != nil {
			return err
		}
	}
	return nil
}

func checkLayerDir(d layerDir) error {
	p := stageLayers + "/" + d.Rel
	fd, err := openNoSymlinks(p)
	if err != nil {
		return fmt.Errorf("opening %s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Dev != d.Dev || st.Ino != d.Ino {
		return errors.New("an overlay dir changed since it was checked; refusing to mount it")
	}
	return nil
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
