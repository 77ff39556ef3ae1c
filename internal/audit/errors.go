package audit

import "errors"

var (
	// ErrNoPath rejects Options without a database path.
	ErrNoPath = errors.New("audit store path is empty")

	// ErrClosed is returned by Flush and Prune on a closed store.
	ErrClosed = errors.New("audit store is closed")

	// ErrSchema rejects a database whose audit schema version this
	// package does not know.
	ErrSchema = errors.New("unknown audit schema version")
)
