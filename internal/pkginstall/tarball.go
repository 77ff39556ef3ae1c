package pkginstall

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
)

// maxPackageJSON bounds the package.json read from a tarball.
const maxPackageJSON = 4 << 20

// tarballBins reads the bins a verified npm tarball declares, before any
// install, so an install that could not run anything fails early.
func tarballBins(tgz []byte, name string) (map[string]string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("reading tarball: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("tarball has no package.json")
		}
		if err != nil {
			return nil, fmt.Errorf("reading tarball: %w", err)
		}
		// npm strips the first component, whatever it is called
		// ("package/" by convention).
		dir, file := path.Split(path.Clean(h.Name))
		if dir == "" || file != "package.json" || path.Dir(path.Clean(dir)) != "." || h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxPackageJSON))
		if err != nil {
			return nil, fmt.Errorf("reading tarball: %w", err)
		}
		return npmBins(data, name)
	}
}
