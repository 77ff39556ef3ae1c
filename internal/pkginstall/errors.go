package pkginstall

import (
	"errors"
	"fmt"
)

// ErrNotFound is a package or version the registry does not have.
var ErrNotFound = errors.New("not found")

// ErrPinMismatch is a registry serving, for a pinned version, other bytes
// than those pinned.
var ErrPinMismatch = errors.New("registry serves different bytes than pinned")

// ErrLockfileMismatch is InstallLocked's error for a kept lockfile that
// is not the one its pin names (edited, or another's).
var ErrLockfileMismatch = errors.New("the kept lockfile is not the one pinned")

// RegistryError is a registry answering a request with an error status
// (a refusal: 401, 403, 5xx, ...).
type RegistryError struct {
	URL    string // without credentials or query
	Status string
}

func (e *RegistryError) Error() string {
	return fmt.Sprintf("registry refused %s: %s", e.URL, e.Status)
}

// IntegrityError is content whose hash differs from the expected one.
type IntegrityError struct {
	Want, Got string // SRI strings
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("integrity mismatch: expected %s, got %s", e.Want, e.Got)
}
