package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Prune removes from the store every root tree and blob that the images
// named by keep do not use. keep holds manifest or index digests (what a
// lock file pins, Image.Digest or IndexDigest); a digest whose manifest is
// not in the store keeps nothing. It takes the store's lock, so it never
// races a pull, and returns how many trees and blobs it removed.
func Prune(ctx context.Context, storeDir string, keep []string) (int, error) {
	if storeDir == "" || !filepath.IsAbs(storeDir) {
		return 0, fmt.Errorf("image store: want an absolute directory")
	}
	st, err := openStore(ctx, storeDir)
	if err != nil {
		return 0, err
	}
	defer st.close()
	used := map[string]bool{}
	for _, d := range keep {
		if err := st.markUsed(d, used, 0); err != nil {
			return 0, err
		}
	}
	removed := 0
	for _, sub := range []string{"rootfs", "blobs/sha256"} {
		ents, err := os.ReadDir(filepath.Join(storeDir, sub))
		if err != nil {
			return removed, fmt.Errorf("reading image store: %w", err)
		}
		for _, e := range ents {
			if used["sha256:"+e.Name()] {
				continue
			}
			if err := removeTree(filepath.Join(storeDir, sub, e.Name())); err != nil {
				return removed, fmt.Errorf("removing %s/%s: %w", sub, e.Name(), err)
			}
			removed++
		}
	}
	return removed, nil
}

// markUsed adds the manifest or index d and all it references to used.
func (s *store) markUsed(d string, used map[string]bool, depth int) error {
	if err := checkDigest(d); err != nil {
		return err
	}
	if depth > 1 || !s.hasBlob(d) {
		return nil
	}
	used[d] = true
	raw, err := s.readBlob(d, maxManifestSize)
	if err != nil {
		return err
	}
	doc, err := parseManifest(raw, d)
	if err != nil {
		return err
	}
	for _, m := range doc.Manifests {
		if err := s.markUsed(m.Digest, used, depth+1); err != nil {
			return err
		}
	}
	if doc.Config != nil {
		used[doc.Config.Digest] = true
	}
	for _, l := range doc.Layers {
		used[l.Digest] = true
	}
	return nil
}
