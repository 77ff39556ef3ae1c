package image

import (
	"context"
	"errors"
	"fmt"
)

// Resolve asks the registry what ref names now, without pulling it: the
// digest of the manifest or multi-arch index its tag points to (an
// Image's IndexDigest if set, else its Digest). A reference with a digest
// resolves to that digest without a request. The manifest is checked
// against the digest it hashes to and kept in the store.
func Resolve(ctx context.Context, ref string, opts Options) (string, error) {
	top, _, err := ResolvePlatform(ctx, ref, opts)
	return top, err
}

// ResolvePlatform is Resolve, and also the digest of the image for the
// platform of opts: the one a multi-arch index lists for it, or the same
// digest for a single image's manifest ("" for a reference with a
// digest, which asks nothing, or for an index without one for the
// platform).
func ResolvePlatform(ctx context.Context, ref string, opts Options) (top, platform string, err error) {
	plat, err := opts.check()
	if err != nil {
		return "", "", err
	}
	r, err := ParseRef(ref)
	if err != nil {
		return "", "", err
	}
	if r.Digest != "" {
		return r.Digest, "", nil
	}
	if opts.Insecure && !r.Loopback() {
		return "", "", fmt.Errorf("registry %s: plain HTTP is allowed to loopback registries only: %w", r.Registry, ErrInsecure)
	}
	st, err := openStore(ctx, opts.Store)
	if err != nil {
		return "", "", err
	}
	defer st.close()
	p := &puller{ref: r, opts: opts, limits: opts.Limits.withDefaults(), store: st, plat: plat}
	raw, digest, err := p.manifest(ctx, r.Tag, "")
	if err != nil {
		return "", "", err
	}
	doc, err := parseManifest(raw, digest)
	if err != nil {
		return "", "", fmt.Errorf("image %s: %w", r, err)
	}
	if doc.Config != nil {
		return digest, digest, nil
	}
	child, err := p.pick(doc)
	if errors.Is(err, ErrNoPlatform) {
		return digest, "", nil // none for this platform: not the pinned one either
	} else if err != nil {
		return "", "", err
	}
	return digest, child.Digest, nil
}
