package integrity

import (
	"fmt"
	"regexp"
	"sync"
)

// PackagePin is what mcpbox.lock records of a server's registry package
// (package: npm:NAME@RANGE, or a recognised npx/uvx command): the version
// a range resolved to, the SRI hash of the package's own archive and of
// the lockfile of its dependencies. It is kept in the lock file's
// "packages" section, by server name, beside the tool pins; lock files
// written before packages existed read as having none.
type PackagePin struct {
	Ecosystem string `json:"ecosystem"`
	// Integrity is the SRI hash of the package's archive (sha512 for
	// npm, a wheel's sha256 for PyPI).
	Integrity string `json:"integrity"`
	// Lockfile is the SRI hash of the installed tree's lockfile
	// (package-lock.json, requirements.lock); may be empty.
	Lockfile string `json:"lockfile,omitempty"`
	Name     string `json:"name"`
	// Source is the package as the config named it (a range, a tag):
	// when the config names another, the pin no longer applies.
	Source  string `json:"source"`
	Version string `json:"version"`
}

// String is "ECOSYSTEM:NAME@VERSION".
func (p PackagePin) String() string { return p.Ecosystem + ":" + p.Name + "@" + p.Version }

// sriRE is an SRI hash as the installers write them.
var sriRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha(256|384|512)-[A-Za-z0-9+/]+={0,2}$`) })

// check refuses a pin that cannot have been written by mcpbox.
func (p PackagePin) check() error {
	switch {
	case p.Ecosystem != "npm" && p.Ecosystem != "pypi":
		return fmt.Errorf("unknown ecosystem %q", p.Ecosystem)
	case p.Name == "" || p.Version == "" || p.Source == "":
		return fmt.Errorf("name, version and source are required")
	case !sriRE().MatchString(p.Integrity):
		return fmt.Errorf("integrity %q is not an SRI hash", p.Integrity)
	case p.Lockfile != "" && !sriRE().MatchString(p.Lockfile):
		return fmt.Errorf("lockfile %q is not an SRI hash", p.Lockfile)
	}
	return nil
}

func readPackages(l *Lock, m map[string]PackagePin) error {
	for server, p := range m {
		if err := p.check(); err != nil {
			return fmt.Errorf("package of server %q: %w", server, err)
		}
	}
	l.Packages = m
	return nil
}

// ReadPackagePin returns the package pin of server in the lock file at
// path; ok is false when there is none.
func ReadPackagePin(path, server string) (pin PackagePin, ok bool, err error) {
	l, err := ReadLock(path)
	if err != nil {
		return PackagePin{}, false, err
	}
	pin, ok = l.Packages[server]
	return pin, ok, nil
}

// WritePackagePin records pin as server's package in the lock file at
// path, under the same flock as the tool pins' writes and after
// re-reading the file, so no writer loses another's pins. A zero pin
// removes the server's entry.
func WritePackagePin(path, server string, pin PackagePin) error {
	if pin != (PackagePin{}) {
		if err := pin.check(); err != nil {
			return fmt.Errorf("pinning the package of server %s: %w", server, err)
		}
	}
	release, err := acquireFlock(path + ".flock")
	if err != nil {
		return err
	}
	defer release()
	l, err := ReadLock(path)
	if err != nil {
		return err
	}
	if pin == (PackagePin{}) {
		delete(l.Packages, server)
	} else {
		if l.Packages == nil {
			l.Packages = map[string]PackagePin{}
		}
		l.Packages[server] = pin
	}
	return WriteLock(path, l)
}
