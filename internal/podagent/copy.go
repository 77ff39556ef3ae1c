//go:build linux

package podagent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CopySelf copies the running executable (/proc/self/exe, so neither its
// path nor a PATH lookup matters) to dst with mode 0555: into a temporary
// file in dst's directory, synced, then renamed over dst, so that dst is
// either absent or whole. It is `mcpbox agent --copy-to DST`, the init
// container that brings the agent into a pod whose image lacks it
// (backend.agent_image): that image needs nothing but mcpbox.
func CopySelf(dst string) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("opening the running executable: %w", err)
	}
	defer src.Close()
	if err := writeAtomic(dst, src, 0o555); err != nil {
		return fmt.Errorf("copying the agent to %s: %w", dst, err)
	}
	return nil
}

// writeAtomic writes src to dst with mode: into a temporary file in dst's
// directory, synced, then renamed over dst, so that dst is either absent
// or whole (the temporary file is removed on failure).
func writeAtomic(dst string, src io.Reader, mode os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, src); err != nil {
		return err
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
