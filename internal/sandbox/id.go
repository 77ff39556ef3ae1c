package sandbox

import (
	"crypto/rand"
	"strings"
)

// NewID returns a fresh sandbox id: "sbx_" and 16 random base32 letters
// and digits (80 bits). Every sandbox gets its id here, the gateway's
// (track.NewSandbox) and an install's alike, so that they read the same
// in the audit and in mcpbox ps.
func NewID() string {
	return "sbx_" + strings.ToLower(rand.Text()[:16])
}
