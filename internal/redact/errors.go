package redact

import "errors"

var (
	// ErrShortValue rejects a secret value shorter than MinValueLen bytes:
	// short values match ordinary text too often. Options.AllowShort forces
	// them.
	ErrShortValue = errors.New("secret value shorter than 8 bytes")

	// ErrEmptyValue rejects an empty secret value, which would match
	// everywhere; AllowShort does not force it.
	ErrEmptyValue = errors.New("secret value is empty")

	// ErrEmptyName rejects a secret without a name for its replacement text.
	ErrEmptyName = errors.New("secret name is empty")

	// ErrClosed is returned by a Writer used after Close.
	ErrClosed = errors.New("redacting writer is closed")
)
