package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

func registryDir(root string) string { return filepath.Join(root, "statedirs") }

// Register names stateDir (absolute) in root's registry, so that `--all`
// finds it; registering it again changes nothing.
func Register(root, stateDir string) error {
	dir := registryDir(root)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating state dir registry: %w", err)
	}
	sum := sha256.Sum256([]byte(stateDir))
	link := filepath.Join(dir, hex.EncodeToString(sum[:8]))
	if cur, err := os.Readlink(link); err == nil && cur == stateDir {
		return nil
	}
	tmp := link + fmt.Sprintf(".%d.tmp", os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(stateDir, tmp); err != nil {
		return fmt.Errorf("registering state dir: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("registering state dir: %w", err)
	}
	return nil
}

// StateDirs lists the registered state dirs that still exist, sorted.
// Links to missing dirs are removed.
func StateDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(registryDir(root))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing state dir registry: %w", err)
	}
	var out []string
	for _, e := range ents {
		link := filepath.Join(registryDir(root), e.Name())
		target, err := os.Readlink(link)
		if err != nil || !filepath.IsAbs(target) {
			continue
		}
		if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
			if errors.Is(err, fs.ErrNotExist) {
				os.Remove(link)
			}
			continue
		}
		if !slices.Contains(out, target) {
			out = append(out, target)
		}
	}
	slices.Sort(out)
	return out, nil
}

// All lists the live instances of every registered state dir. A state
// dir that cannot be listed does not hide the others: its error is
// returned only when no instance was found.
func All(root string) ([]Record, error) {
	dirs, err := StateDirs(root)
	if err != nil {
		return nil, err
	}
	var out []Record
	var errs []error
	for _, d := range dirs {
		recs, err := List(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, recs...)
	}
	if len(out) == 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
