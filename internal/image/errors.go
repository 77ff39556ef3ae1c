package image

import "errors"

// ErrNotFound is returned by Pull when the registry has no such tag or
// digest (or no such repository).
var ErrNotFound = errors.New("image not found")

// ErrNoPlatform is returned by Pull when a multi-arch index lists no image
// for the requested platform.
var ErrNoPlatform = errors.New("no image for the platform")

// ErrDigest is returned by Pull when a blob's bytes do not match the
// digest (or size) that named it: a tampered registry, store or transfer.
var ErrDigest = errors.New("digest mismatch")

// ErrLimit is returned by Pull when an image is larger than Options.Limits
// allows.
var ErrLimit = errors.New("image over its size limit")

// ErrHostile is returned by Pull for a layer entry that tries to reach
// outside the root (a ".." name, a hard link leaving the tree, a whiteout
// of "..") or is otherwise malformed.
var ErrHostile = errors.New("hostile layer")

// ErrInsecure is returned by Pull for plain HTTP to a registry that is not
// on loopback, or to any registry without Options.Insecure.
var ErrInsecure = errors.New("plain HTTP refused")
