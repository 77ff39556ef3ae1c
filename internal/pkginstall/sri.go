package pkginstall

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"strings"
)

// Subresource Integrity strings ("sha512-BASE64"), as npm's dist.integrity
// and lockfiles write them; PyPI's sha256 hex digests are kept in the
// same form ("sha256-BASE64").

// parseSRI returns the sha512 digest of an SRI string (possibly among
// other hashes separated by spaces). For npm only sha512 counts: its
// legacy sha1 shasum is too weak to pin anything.
func parseSRI(s string) ([]byte, error) {
	alg, d, err := parseDigest(s)
	if err != nil {
		return nil, err
	}
	if alg != "sha512" {
		return nil, fmt.Errorf("integrity %q has no sha512 hash", s)
	}
	return d, nil
}

// parseDigest returns the strongest of the sha512 and sha256 hashes of an
// SRI string.
func parseDigest(s string) (alg string, digest []byte, err error) {
	sizes := map[string]int{"sha512": sha512.Size, "sha256": sha256.Size}
	for _, f := range strings.Fields(s) {
		a, b64, ok := strings.Cut(f, "-")
		if !ok || sizes[a] == 0 || (alg == "sha512" && a == "sha256") {
			continue
		}
		if i := strings.IndexByte(b64, '?'); i >= 0 {
			b64 = b64[:i] // SRI options
		}
		d, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(d) != sizes[a] {
			return "", nil, fmt.Errorf("integrity %q: not a %s digest", f, a)
		}
		alg, digest = a, d
	}
	if alg == "" {
		return "", nil, fmt.Errorf("integrity %q has no sha512 or sha256 hash", s)
	}
	return alg, digest, nil
}

// sri is the canonical SRI form of data's sha512.
func sri(data []byte) string {
	d := sha512.Sum512(data)
	return "sha512-" + base64.StdEncoding.EncodeToString(d[:])
}

// sri256 is the SRI form of data's sha256.
func sri256(data []byte) string {
	d := sha256.Sum256(data)
	return "sha256-" + base64.StdEncoding.EncodeToString(d[:])
}

// checkIntegrity compares data's hash with the SRI string want.
func checkIntegrity(data []byte, want string) error {
	alg, d, err := parseDigest(want)
	if err != nil {
		return err
	}
	got := sri(data)
	if alg == "sha256" {
		got = sri256(data)
	}
	if !sameDigest(got, alg+"-"+base64.StdEncoding.EncodeToString(d)) {
		return &IntegrityError{Want: want, Got: got}
	}
	return nil
}

// sameDigest reports whether two SRI strings name the same hash;
// unparseable ones are never the same.
func sameDigest(a, b string) bool {
	aa, da, err := parseDigest(a)
	if err != nil {
		return false
	}
	ab, db, err := parseDigest(b)
	return err == nil && aa == ab && string(da) == string(db)
}
