package image

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Ref is a parsed image reference.
type Ref struct {
	Registry   string // host[:port]; "index.docker.io" for Docker Hub
	Repository string // e.g. "library/alpine", "github/github-mcp-server"
	Tag        string // empty when only a digest is given
	Digest     string // "sha256:..." or empty
}

// String is the reference in its full form: REGISTRY/REPO[:TAG][@DIGEST].
func (r Ref) String() string {
	s := r.Registry + "/" + r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Loopback reports whether the registry is on the loopback interface.
func (r Ref) Loopback() bool { return loopbackHost(r.Registry) }

// ParseRef parses an image reference as docker does: "alpine" is
// index.docker.io/library/alpine:latest, "ghcr.io/o/s:v1",
// "host:5000/o/s@sha256:...". A reference with both a tag and a digest is
// pulled by its digest.
func ParseRef(s string) (Ref, error) {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return Ref{}, fmt.Errorf("image reference %q: empty or holds whitespace", s)
	}
	// Tag and digest together: name.ParseReference takes only the digest.
	tag := ""
	if at := strings.Index(s, "@"); at >= 0 {
		base := s[:at]
		if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
			tag = base[i+1:]
		}
	}
	ref, err := name.ParseReference(s, name.StrictValidation)
	if err != nil {
		// StrictValidation wants an explicit tag; retry for the default.
		ref, err = name.ParseReference(s)
	}
	if err != nil {
		return Ref{}, fmt.Errorf("image reference %q: %w", s, err)
	}
	r := Ref{Registry: ref.Context().RegistryStr(), Repository: ref.Context().RepositoryStr()}
	switch v := ref.(type) {
	case name.Tag:
		r.Tag = v.TagStr()
	case name.Digest:
		r.Digest = v.DigestStr()
		r.Tag = tag
	}
	if r.Digest != "" && !strings.HasPrefix(r.Digest, "sha256:") {
		return Ref{}, fmt.Errorf("image reference %q: only sha256 digests are supported", s)
	}
	return r, nil
}

// loopbackHost reports whether host[:port] names the loopback interface:
// localhost, 127.0.0.0/8 or ::1.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
