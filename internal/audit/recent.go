package audit

import (
	"context"
	"fmt"
)

// Recent returns up to limit records that match f (f.Limit is ignored),
// newest first: those with Seq below before (0: no bound) and, when
// outcome is set, that Outcome. It pages a dashboard's view of the trail
// backwards from the head.
func (r *Reader) Recent(ctx context.Context, f Filter, outcome string, before int64, limit int) ([]Record, error) {
	where, args := f.where()
	add := func(cond string, arg any) {
		if where == "" {
			where = " WHERE " + cond
		} else {
			where += " AND " + cond
		}
		args = append(args, arg)
	}
	if before > 0 {
		add("seq < ?", before)
	}
	if outcome != "" {
		add("json_extract(body, '$.outcome') = ?", outcome)
	}
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	return r.queryRecords(ctx, `SELECT `+rowColumns+` FROM audit_records`+where+` ORDER BY seq DESC LIMIT ?`, args...)
}

// Head is the Seq of the newest record (0 for none): a follower that
// wants only what comes after now starts there.
func (r *Reader) Head(ctx context.Context) (int64, error) {
	var seq int64
	if err := r.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM audit_records`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("reading the audit log's head: %w", err)
	}
	return seq, nil
}

// Recent is Reader.Recent on the store's file.
func (s *Store) Recent(ctx context.Context, f Filter, outcome string, before int64, limit int) ([]Record, error) {
	return s.rd.Recent(ctx, f, outcome, before, limit)
}

// Head is Reader.Head on the store's file.
func (s *Store) Head(ctx context.Context) (int64, error) { return s.rd.Head(ctx) }
