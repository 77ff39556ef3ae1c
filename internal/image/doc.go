// Package image pulls OCI (and Docker v2) images from a registry without
// Docker and unpacks them into read-only root file system trees that a
// sandbox uses in place of the host's system view (sandbox.Spec.Root).
//
// [Pull] resolves a reference (tag or digest) with the user's registry
// credentials (the docker config.json under $DOCKER_CONFIG or ~/.docker,
// and its credential helpers), picks the host's platform from a
// multi-arch index, and stores every blob content-addressed under
// Options.Store/blobs/sha256. Each blob (index, manifest, config, layer) is
// hashed as it arrives and again whenever it is read back, and refused when
// its digest or size differs from what the manifest says. The root tree
// is built in a temp dir and renamed to Options.Store/rootfs/HEX (HEX: the
// manifest digest), so a tree in its final place is always complete; a
// pull that dies leaves only temp files, which the next pull removes.
//
// Unpacking treats every layer as hostile (unpack_linux.go): all writes go
// through a file descriptor of the tree with openat2 RESOLVE_IN_ROOT, so
// an absolute or ".." symlink a layer planted resolves inside the tree,
// never outside; final path components are never followed; entry names
// and hard-link targets with ".." are refused; device nodes and fifos are
// skipped (with a note); setuid, setgid and sticky bits and extended
// attributes (file capabilities) are dropped; whiteouts (.wh.NAME) and
// opaque directories (.wh..wh..opq) apply to lower layers only; and total
// bytes, entry count and file size are capped (Limits). Files are owned
// by the invoking user, which the sandbox maps to its own user.
//
// Plain HTTP is refused to every registry but a loopback one, and even
// there only with Options.Insecure. The package never runs anything from
// an image and never talks to a Docker daemon. It does not import the
// sandbox: the caller turns [Image.Config] into the sandbox's argv, env
// and working directory.
package image
