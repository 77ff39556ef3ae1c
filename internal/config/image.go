package config

import (
	"fmt"
	"net/netip"
	"strings"

	crname "github.com/google/go-containerregistry/pkg/name"
)

// An image server runs an OCI image instead of a command:
//
//	image: ghcr.io/github/github-mcp-server:v1.2
//	args: [stdio]
//
// mcpbox pulls the image itself (no Docker), pins its digest in
// mcpbox.lock and runs it with the image's tree as the sandbox's system
// view; Args replace the image's Cmd. Image is exclusive with Command,
// URL and Builtin, and the server runs in a sandbox of its own.

// ImageSource is an image server's image.
type ImageSource struct {
	// Ref is the image reference, a tag or a digest: "ghcr.io/o/s:v1",
	// "ghcr.io/o/s:v1@sha256:HEX", "alpine" (Docker Hub, latest).
	Ref string
	// Insecure allows plain HTTP to the registry, which must then be on
	// loopback (localhost, 127.0.0.0/8, ::1).
	Insecure bool
	// Platform is "os/arch[/variant]"; empty: the host's.
	Platform string
}

// isImage reports whether s names an image (even an empty one).
func isImage(s *Server) bool { return s.Image.Ref != "" || s.Meta.Has("image") }

// checkImage checks image, its options and args: a reference of the
// right shape (the daemon parses it fully when it pulls), no other run
// target, plain HTTP to loopback only, a sandbox of its own.
func checkImage(r *collector, s *Server, p string) {
	img := isImage(s)
	for _, key := range []string{"image_insecure", "image_platform"} {
		if s.Meta.Has(key) && !img {
			r.errorf(s.Meta.At(key), "%s.%s: only applies to an image server (image: REF)", p, key)
		}
	}
	if s.Meta.Has("args") && !img && !s.Meta.Has("package") {
		r.errorf(s.Meta.At("args"), "%s.args: args replace an image's Cmd; a command takes its arguments in the command list", p)
	}
	if !img {
		return
	}
	at := s.Meta.At("image")
	switch {
	case s.Command != nil:
		r.errorf(at, "%s: image and command are exclusive", p)
	case s.Builtin != "" || s.Meta.Has("builtin"):
		r.errorf(at, "%s: image and builtin are exclusive", p)
	case s.URL != "" || s.Meta.Has("url"):
		r.errorf(at, "%s: image and url are exclusive (an image runs in a local sandbox)", p)
	}
	if err := checkImageRef(s.Image.Ref); err != nil {
		r.errorf(at, "%s.image: %v", p, err)
	} else if s.Image.Insecure && !LoopbackRegistry(s.Image.Ref) {
		r.errorf(s.Meta.At("image_insecure"), "%s.image_insecure: plain HTTP is allowed to a loopback registry only (localhost, 127.0.0.1, [::1]), not %s", p, imageRegistry(s.Image.Ref))
	}
	if s.Meta.Has("image_platform") {
		if parts := strings.Split(s.Image.Platform, "/"); len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			r.errorf(s.Meta.At("image_platform"), "%s.image_platform: %q: want os/arch[/variant], e.g. linux/arm64", p, s.Image.Platform)
		}
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			r.errorf(s.Meta.Elem("args", i), "%s.args[%d]: must not contain NUL", p, i)
		}
	}
	if strings.HasPrefix(s.Placement, PlacementGroup) {
		r.errorf(s.Meta.At("placement"), "%s.placement: an image server runs in a sandbox of its own (its image is the sandbox's root)", p)
	}
}

// checkImageRef checks the shape of an image reference: no whitespace,
// and a digest, if given, "sha256:" and 64 lowercase hex digits.
func checkImageRef(ref string) error {
	switch {
	case ref == "":
		return fmt.Errorf("must not be empty (want REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST)")
	case strings.ContainsAny(ref, " \t\r\n\x00"):
		return fmt.Errorf("%q must not contain whitespace", ref)
	case strings.Contains(ref, "://"):
		return fmt.Errorf("%q: an image reference has no scheme (want e.g. ghcr.io/org/server:v1)", ref)
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ":") {
		return fmt.Errorf("%q: want REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST", ref)
	}
	if hasDigest {
		hex, ok := strings.CutPrefix(digest, "sha256:")
		if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
			return fmt.Errorf("%q: the digest must be sha256: and 64 lowercase hex digits", ref)
		}
	}
	// As the puller reads it (internal/image.ParseRef): before, a
	// reference it refuses (upper case, a second ":") passed policy check
	// and failed at every start.
	if _, err := crname.ParseReference(ref); err != nil {
		return fmt.Errorf("%q is no image reference the puller reads (want lower-case REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST)", ref)
	}
	return nil
}

// imageRegistry is the registry host of ref as docker reads it: the first
// path component when it has a dot or a port or is localhost, else
// Docker Hub.
func imageRegistry(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	first, _, ok := strings.Cut(name, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost" || strings.HasPrefix(first, "[")) {
		return first
	}
	return "docker.io"
}

// LoopbackRegistry reports whether the registry of image reference ref
// is on loopback (localhost, 127.0.0.0/8, ::1), where docker speaks
// plain HTTP.
func LoopbackRegistry(ref string) bool {
	host := imageRegistry(ref)
	if h, _, err := SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
