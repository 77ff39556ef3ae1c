package egress

import "errors"

var (
	// ErrByteLimit ends a connection that reached Limits.MaxBytesPerConn or
	// Limits.MaxBytesTotal.
	ErrByteLimit = errors.New("egress byte limit reached")

	// ErrMaxDuration ends a connection older than Limits.MaxDuration.
	ErrMaxDuration = errors.New("egress connection exceeded its maximum duration")

	// ErrIdle ends a connection idle for Limits.IdleTimeout.
	ErrIdle = errors.New("egress connection idle too long")
)
