package pkginstall

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

// Pin is what mcpbox.lock records of an installed package: enough to
// find it in the store without network, and to refuse a registry that
// later serves other bytes for the same version.
type Pin struct {
	Ecosystem Ecosystem `json:"ecosystem" yaml:"ecosystem"`
	Name      string    `json:"name" yaml:"name"`
	Version   string    `json:"version" yaml:"version"`
	// Integrity is the SRI sha512 of the package's own archive (npm's
	// dist.integrity, a wheel's hash for PyPI).
	Integrity string `json:"integrity" yaml:"integrity"`
	// Lockfile is the SRI sha512 of the generated package-lock.json,
	// which holds the integrity of every dependency; empty when not
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
var pep440Exact = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$`)

// Verify checks, against the registry, that the pinned version still
// exists and that its metadata and its archive still hash to
// pin.Integrity. A registry that now serves other bytes is refused with
// an error wrapping ErrPinMismatch. It needs the network and installs
// nothing.
func (in *Installer) Verify(ctx context.Context, pin Pin) error {
	if err := checkPinPath(pin); err != nil {
		return err
	}
	if _, err := parseSRI(pin.Integrity); err != nil {
		return fmt.Errorf("pin of %s: %w", pin, err)
	}
	switch pin.Ecosystem {
	case NPM:
		return in.verifyNPM(ctx, pin)
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

// sameDigest compares the sha512 of two SRI strings; unparseable is not
// the same.
func sameDigest(a, b string) bool {
	da, err := parseSRI(a)
	if err != nil {
		return false
	}
	db, err := parseSRI(b)
	return err == nil && string(da) == string(db)
}
