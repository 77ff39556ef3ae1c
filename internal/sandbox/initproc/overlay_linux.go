package initproc

import (
	"errors"
	"fmt"
	"os"

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
