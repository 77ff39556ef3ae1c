package approval

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver for callers and tests; pure Go, no cgo
)

// Request statuses in approval_requests.
const (
	statusPending   = "pending"
	statusAllowed   = "allowed"
	statusDenied    = "denied"
	statusExpired   = "expired"
	statusCancelled = "cancelled" // denied because its call was cancelled (ByCancelled)
)

// schema is created if missing. The tables live next to the audit log's in
// a shared file, so every name carries the approval_ prefix. Times are
// RFC 3339 text in UTC, readable by anyone who opens the file.
const schema = `
CREATE TABLE IF NOT EXISTS approval_requests (
	id           TEXT PRIMARY KEY,
	time         TEXT NOT NULL,
	kind         TEXT NOT NULL,
	client       TEXT NOT NULL,
	session      TEXT NOT NULL,
	server       TEXT NOT NULL,
	tool         TEXT NOT NULL,
	sandbox      TEXT NOT NULL,
	rule         TEXT NOT NULL,
	summary      TEXT NOT NULL,
	arguments    TEXT NOT NULL DEFAULT '',
	status       TEXT NOT NULL,
	allow        INTEGER NOT NULL DEFAULT 0,
	scope        TEXT NOT NULL DEFAULT '',
	decided_by   TEXT NOT NULL DEFAULT '',
	reason       TEXT NOT NULL DEFAULT '',
	decided_time TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS approval_requests_status ON approval_requests(status);
CREATE TABLE IF NOT EXISTS approval_remembered (
	id         TEXT PRIMARY KEY,
	client     TEXT NOT NULL,
	server     TEXT NOT NULL,
	tool       TEXT NOT NULL,
	scope      TEXT NOT NULL,
	decided_by TEXT NOT NULL,
	time       TEXT NOT NULL,
	UNIQUE (client, server, tool)
);
`

// store is the SQL side of the broker. It holds no state of its own; the
// database serializes writers.
type store struct {
	db *sql.DB
}

func openStore(ctx context.Context, db *sql.DB, now time.Time, shared bool) (*store, error) {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("creating approval tables: %w", err)
	}
	if err := migrate(ctx, db); err != nil {
		return nil, err
	}
	s := &store{db: db}
	if shared {
		return s, nil // the pending requests may be held by another broker; so may be pruning
	}
	if err := s.expirePending(ctx, now); err != nil {
		return nil, err
	}
	if err := s.pruneDecided(ctx, now.Add(-keepDecided)); err != nil {
		return nil, err
	}
	return s, nil
}

// added are the columns of approval_requests that databases made by
// earlier versions lack, with their definitions.
var added = []struct{ name, def string }{
	{"arguments", "TEXT NOT NULL DEFAULT ''"}, // the whole redacted arguments
}

// migrate adds the columns an older approval_requests lacks, so that a
// state dir of an earlier version keeps opening; old rows read as having
// no arguments.
func migrate(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info('approval_requests')`)
	if err != nil {
		return fmt.Errorf("reading the approval_requests columns: %w", err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("reading the approval_requests columns: %w", err)
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the approval_requests columns: %w", err)
	}
	for _, c := range added {
		if have[c.name] {
			continue
		}
		if _, err := db.ExecContext(ctx, `ALTER TABLE approval_requests ADD COLUMN `+c.name+` `+c.def); err != nil {
			return fmt.Errorf("adding the column approval_requests.%s: %w", c.name, err)
		}
	}
	return nil
}

// keepDecided is how long decided requests (and their argument
// summaries and arguments) are kept; the audit log keeps the decisions themselves.
const keepDecided = 30 * 24 * time.Hour

// pruneDecided deletes decided and expired requests from before cutoff.
// RFC 3339 UTC text sorts as time does.
func (s *store) pruneDecided(ctx context.Context, cutoff time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM approval_requests WHERE status != ? AND time < ?`,
		statusPending, fmtTime(cutoff))
	if err != nil {
		return fmt.Errorf("pruning old approvals: %w", err)
	}
	return nil
}

// expirePending marks requests left pending by an earlier process as
// expired: the calls that waited on them are gone with that process.
func (s *store) expirePending(ctx context.Context, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE approval_requests
		SET status = ?, decided_by = 'restart', reason = 'the process that held the call ended', decided_time = ?
		WHERE status = ?`, statusExpired, fmtTime(now), statusPending)
	if err != nil {
		return fmt.Errorf("expiring pending approvals: %w", err)
	}
	return nil
}

func (s *store) insertPending(ctx context.Context, r Request) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO approval_requests
		(id, time, kind, client, session, server, tool, sandbox, rule, summary, arguments, status)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, fmtTime(r.Time), r.Kind, r.Client, r.Session, r.Server, r.Tool, r.Sandbox, r.Rule, r.Summary, string(r.Arguments), statusPending)
	if err != nil {
		return fmt.Errorf("recording approval %s: %w", r.ID, err)
	}
	return nil
}

// finish records the decision of a pending request. It does not check the
// status: the broker's pending map already made this the only decision.
func (s *store) finish(ctx context.Context, id string, d Decision, now time.Time) error {
	status := statusDenied
	switch {
	case d.Allow:
		status = statusAllowed
	case d.By == ByCancelled:
		status = statusCancelled
	}
	_, err := s.db.ExecContext(ctx, `UPDATE approval_requests
		SET status = ?, allow = ?, scope = ?, decided_by = ?, reason = ?, decided_time = ?
		WHERE id = ?`, status, d.Allow, d.Scope, d.By, d.Reason, fmtTime(now), id)
	if err != nil {
		return fmt.Errorf("recording decision of %s: %w", id, err)
	}
	return nil
}

// status returns the stored status of a request and the reason of its
// decision, or "" if there is none.
func (s *store) status(ctx context.Context, id string) (st, by, reason string, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT status, decided_by, reason FROM approval_requests WHERE id = ?`, id).Scan(&st, &by, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", "", nil
	}
	if err != nil {
		return "", "", "", fmt.Errorf("reading approval %s: %w", id, err)
	}
	return st, by, reason, nil
}

// remember stores an always-scoped allow, replacing an earlier one for the
// same client, server and tool.
func (s *store) remember(ctx context.Context, m Remembered) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO approval_remembered
		(id, client, server, tool, scope, decided_by, time) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (client, server, tool) DO UPDATE SET
		id = excluded.id, scope = excluded.scope, decided_by = excluded.decided_by, time = excluded.time`,
		m.ID, m.Client, m.Server, m.Tool, m.Scope, m.By, fmtTime(m.Time))
	if err != nil {
		return fmt.Errorf("remembering approval %s: %w", m.ID, err)
	}
	return nil
}

// lookup returns the always-scoped allow for client, server and tool.
func (s *store) lookup(ctx context.Context, client, server, tool string) (Remembered, bool, error) {
	row := s.db.QueryRowContext(ctx, `SELECT id, client, server, tool, scope, decided_by, time
		FROM approval_remembered WHERE client = ? AND server = ? AND tool = ?`, client, server, tool)
	m, err := scanRemembered(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Remembered{}, false, nil
	}
	if err != nil {
		return Remembered{}, false, fmt.Errorf("looking up remembered approval: %w", err)
	}
	return m, true, nil
}

func (s *store) listRemembered(ctx context.Context) ([]Remembered, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, client, server, tool, scope, decided_by, time
		FROM approval_remembered ORDER BY time, id`)
	if err != nil {
		return nil, fmt.Errorf("listing remembered approvals: %w", err)
	}
	defer rows.Close()
	var out []Remembered
	for rows.Next() {
		m, err := scanRemembered(rows)
		if err != nil {
			return nil, fmt.Errorf("listing remembered approvals: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing remembered approvals: %w", err)
	}
	return out, nil
}

// RememberedIn lists the decisions remembered for always in db, which
// it only reads (a state dir's audit store while no serve runs, opened
// read-only): none when the store has no approval tables yet.
func RememberedIn(ctx context.Context, db *sql.DB) ([]Remembered, error) {
	out, err := (&store{db: db}).listRemembered(ctx)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return nil, nil
	}
	return out, err
}

// forget deletes a remembered decision; false if there was none.
func (s *store) forget(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM approval_remembered WHERE id = ?`, id)
	if err != nil {
		return false, fmt.Errorf("revoking approval %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("revoking approval %s: %w", id, err)
	}
	return n > 0, nil
}

type scanner interface{ Scan(...any) error }

func scanRemembered(r scanner) (Remembered, error) {
	var m Remembered
	var t string
	if err := r.Scan(&m.ID, &m.Client, &m.Server, &m.Tool, &m.Scope, &m.By, &t); err != nil {
		return Remembered{}, err
	}
	m.Time, _ = time.Parse(time.RFC3339Nano, t) // written by fmtTime; a bad value reads as zero time
	return m, nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
