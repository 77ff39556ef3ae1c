package image

import (
	"context"
	"fmt"
)

// Resolve asks the registry what ref names now, without pulling it: the
// digest of the manifest or multi-arch index its tag points to (an
// Image's IndexDigest if set, else its Digest). A reference with a digest
// resolves to that digest without a request. The manifest is checked
// against the digest it hashes to and kept in the store.
func Resolve(ctx context.Context, ref string, opts Options) (string, error) {
	if _, err := opts.check(); err != nil {
		return "", err
	}
	r, err := ParseRef(ref)
	if err != nil {
		return "", err
	}
	if r.Digest != "" {
		return r.Digest, nil
	}
	if opts.Insecure && !r.Loopback() {
		return "", fmt.Errorf("registry %s: plain HTTP is allowed to loopback registries only: %w", r.Registry, ErrInsecure)
	}
	st, err := openStore(ctx, opts.Store)
	if err != nil {
		return "", err
	}
	defer st.close()
	p := &puller{ref: r, opts: opts, limits: opts.Limits.withDefaults(), store: st}
	raw, digest, err := p.manifest(ctx, r.Tag, "")
	if err != nil {
		return "", err
	}
	if _, err := parseManifest(raw, digest); err != nil {
		return "", fmt.Errorf("image %s: %w", r, err)
	}
	return digest, nil
}
