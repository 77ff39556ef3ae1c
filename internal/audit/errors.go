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

	// ErrFailing is wrapped by the errors of a store that cannot write
	// (Err, Ticket.Wait, Flush): its last commit failed and none has
	// succeeded since.
	ErrFailing = errors.New("the audit store cannot write")

	// ErrFileGone is a commit's error when the database file was deleted
	// or replaced while the store had it open.
	ErrFileGone = errors.New("the audit database was deleted or replaced while open")
)

// Problem says in a few user-safe words (no paths) what keeps the store
// from writing, for err from Err, Ticket.Wait or Flush; the full error
// belongs in the operator's log.
func Problem(err error) string {
	var coded interface{ Code() int } // SQLite's result code
	switch {
	case errors.Is(err, ErrFileGone):
		return "its database file was deleted or replaced"
	case errors.Is(err, ErrClosed):
		return "it is closed"
	case errors.As(err, &coded):
		switch coded.Code() & 0xff { // the primary result code
		case 13: // SQLITE_FULL
			return "the disk is full"
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return "its database is locked by another process"
		case 8: // SQLITE_READONLY
			return "its database is read-only"
		case 11, 26: // SQLITE_CORRUPT, SQLITE_NOTADB
			return "its database is corrupted"
		case 10: // SQLITE_IOERR
			return "an I/O error"
		}
	}
	return "a write error"
}
