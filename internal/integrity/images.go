package integrity

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sync"
)

// ErrImagePin rejects an image pin of the lock file that is malformed:
// a digest that is not "sha256:" and 64 hex digits, or no reference.
var ErrImagePin = errors.New("malformed image pin")

// ImagePin is the image a server runs, as the lock file records it: the
// reference the config named and the digests it resolved to. A start
// runs exactly Digest. The fields are in the file's key order.
type ImagePin struct {
	// Digest is the platform's image manifest: what runs.
	Digest string `json:"digest"`
	// Index is the multi-arch index the reference resolved to, if it
	// named one; "" otherwise. A tag is compared with Index if set, else
	// with Digest.
	Index string `json:"index,omitempty"`
	// Platform is the os/arch[/variant] Digest is for.
	Platform string `json:"platform,omitempty"`
	// Ref is the image reference as the config wrote it.
	Ref string `json:"ref"`
}

// Resolved is the digest the pinned reference resolved to: Index when it
// named a multi-arch index, else Digest.
func (p ImagePin) Resolved() string {
	if p.Index != "" {
		return p.Index
	}
	return p.Digest
}

var digestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })

func (p ImagePin) check() error {
	switch {
	case p.Ref == "":
		return fmt.Errorf("%w: no ref", ErrImagePin)
	case !digestRE().MatchString(p.Digest):
		return fmt.Errorf("%w: digest %q (want sha256: and 64 hex digits)", ErrImagePin, p.Digest)
	case p.Index != "" && !digestRE().MatchString(p.Index):
		return fmt.Errorf("%w: index %q (want sha256: and 64 hex digits)", ErrImagePin, p.Index)
	}
	return nil
}

func readImages(m map[string]ImagePin) (map[string]ImagePin, error) {
	for name, p := range m {
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("image of server %q: %w", name, err)
		}
	}
	return maps.Clone(m), nil
}

func writeImages(lf *lockFile, m map[string]ImagePin) error {
	if _, err := readImages(m); err != nil {
		return fmt.Errorf("encoding lock file: %w", err)
	}
	if len(m) > 0 {
		lf.Images = m
	}
	return nil
}

// Image returns the image pin of server, if the lock has one.
func (l *Lock) Image(server string) (ImagePin, bool) {
	p, ok := l.Images[server]
	return p, ok
}

// SetImagePin records pin as server's image in the lock file at path,
// under the same flock as every other writer, keeping everything else
// of the file.
func SetImagePin(path, server string, pin ImagePin) error {
	if err := pin.check(); err != nil {
		return err
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
	if l.Images == nil {
		l.Images = map[string]ImagePin{}
	}
	l.Images[server] = pin
	return WriteLock(path, l)
}
