// Package bearer keeps the secrets of a state dir: the bearer token that
// guards a gateway's HTTP endpoint when its config names no clients (the
// file "token", Token), and the dashboard's login secret (the file
// "dashboard-secret", Dashboard). Each stays the same across restarts, so
// that a client config holding the token stays valid until the token is
// rotated. The two are apart because client configs hold the token: an
// agent that can read its client's config must not log in to the
// dashboard and approve its own calls.
//
// Each file is the user's secret. It is created with O_EXCL|O_NOFOLLOW
// (through a temporary file linked into place, so that a reader never
// sees it half written), mode 0600, and read only when it is a regular
// file of this user with no permission for group or others and a token of
// the expected shape. Anything else is refused with an error that names
// the file; nothing is repaired behind the user's back. Rotate replaces
// the file atomically (rename); a Watch notices the replacement from its
// identity and times, so a running gateway picks the new token up.
package bearer
