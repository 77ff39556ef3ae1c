package oauth

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Challenge is the Bearer challenge of a WWW-Authenticate header (RFC 6750
// §3, RFC 9728 §5.1).
type Challenge struct {
	// ResourceMetadata is the protected resource metadata URL, if given.
	ResourceMetadata string
	// Scope is the space-separated scope the server asks for, if given.
	Scope string
	// Error is the error code ("invalid_token", "insufficient_scope").
	Error string
}

// ParseChallenge returns the Bearer challenge of h's WWW-Authenticate
// headers and whether there was one. A malformed header counts as none.
func ParseChallenge(h http.Header) (Challenge, bool) {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return Challenge{}, false
	}
	for _, c := range cs {
		if c.Scheme != "bearer" {
			continue
		}
		return Challenge{
			ResourceMetadata: c.Params["resource_metadata"],
			Scope:            c.Params["scope"],
			Error:            c.Params["error"],
		}, true
	}
	return Challenge{}, false
}

// String renders c as a WWW-Authenticate header value, the form the
// gateway sends with a 401 or 403. Empty fields are left out; values are
// quoted (RFC 9110 §5.6.4).
func (c Challenge) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	add("resource_metadata", c.ResourceMetadata)
	add("scope", c.Scope)
	add("error", c.Error)
	if len(parts) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(parts, ", ")
}
