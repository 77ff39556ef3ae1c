package pkginstall

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"sync"
)

// Pin is what mcpbox.lock records of an installed package: enough to
// find it in the store without network, and to refuse a registry that
// later serves other bytes for the same version.
type Pin struct {
	Ecosystem Ecosystem `json:"ecosystem" yaml:"ecosystem"`
	Name      string    `json:"name" yaml:"name"`
	Version   string    `json:"version" yaml:"version"`
	// Integrity is the SRI hash of the package's own archive: npm's
	// dist.integrity (sha512), a wheel's sha256 for PyPI.
	Integrity string `json:"integrity" yaml:"integrity"`
	// Lockfile is the SRI sha512 of the generated lockfile, which holds
	// the hash of every dependency (npm's package-lock.json; for PyPI a
	// requirements.lock in pip's --require-hashes form); empty when not
	// pinned yet.
	Lockfile string `json:"lockfile,omitempty" yaml:"lockfile,omitempty"`
}

// String names the pinned package: "npm:name@1.2.3".
func (p Pin) String() string { return string(p.Ecosystem) + ":" + p.Name + "@" + p.Version }

// Source is the exact source the pin was made from.
func (p Pin) Source() Source {
	return Source{Ecosystem: p.Ecosystem, Name: p.Name, Version: p.Version}
}

// pep440Exact is an exact PyPI version of the common shapes.
var pep440Exact = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$`)
})

// Verify checks, against the registry, that the pinned version still
// exists and that its metadata and its archive still hash to
// pin.Integrity. A registry that now serves other bytes is refused with
// an error wrapping ErrPinMismatch. It needs the network and installs
// nothing.
func (in *Installer) Verify(ctx context.Context, pin Pin) error {
	if err := checkPinPath(pin); err != nil {
		return err
	}
	if _, _, err := parseDigest(pin.Integrity); err != nil {
		return fmt.Errorf("pin of %s: %w", pin, err)
	}
	switch pin.Ecosystem {
	case NPM:
		return in.verifyNPM(ctx, pin)
	case PyPI:
		return in.verifyPyPI(ctx, pin)
	}
	return fmt.Errorf("verifying %s: ecosystem %s is not supported yet", pin, pin.Ecosystem)
}

func (in *Installer) verifyNPM(ctx context.Context, pin Pin) error {
	reg := in.registry()
	p, _, err := reg.packument(ctx, pin.Name)
	if err != nil {
		return err
	}
	v, ok := p.Versions[pin.Version]
	if !ok {
		return fmt.Errorf("pinned %s: version %w in the registry", pin, ErrNotFound)
	}
	if !sameDigest(v.Dist.Integrity, pin.Integrity) {
		return fmt.Errorf("pinned %s: %w (registry metadata %s, pinned %s)", pin, ErrPinMismatch, v.Dist.Integrity, pin.Integrity)
	}
	if _, err := reg.tarball(ctx, pin.Name, v, pin.Integrity); err != nil {
		var ie *IntegrityError
		if errors.As(err, &ie) {
			return fmt.Errorf("pinned %s: %w (archive hashes to %s, pinned %s)", pin, ErrPinMismatch, ie.Got, pin.Integrity)
		}
		return err
	}
	return nil
}

func (in *Installer) verifyPyPI(ctx context.Context, pin Pin) error {
	files, idx, err := in.pypiFiles(ctx, pin.Name)
	if err != nil {
		return err
	}
	wf, err := pickWheel(pin.Name, pin.Version, files)
	if err != nil {
		return fmt.Errorf("pinned %s: %w", pin, err)
	}
	listed := "sha256-" + base64.StdEncoding.EncodeToString(wf.sha256)
	if !sameDigest(listed, pin.Integrity) {
		return fmt.Errorf("pinned %s: %w (index lists %s, pinned %s)", pin, ErrPinMismatch, listed, pin.Integrity)
	}
	whl, err := in.registry().getBasic(ctx, wf.url, idx, "", maxTarball)
	if err != nil {
		return fmt.Errorf("downloading pinned %s: %w", pin, err)
	}
	if err := checkIntegrity(whl, pin.Integrity); err != nil {
		return fmt.Errorf("pinned %s: %w (%v)", pin, ErrPinMismatch, err)
	}
	return nil
}
