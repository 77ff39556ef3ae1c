package audit

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// errNothingToPrune aborts the retention transaction when no record is
// due.
var errNothingToPrune = errors.New("nothing to prune")

// pruning is what one retention pass deleted.
type pruning struct {
	anchor  link // the last deleted record
	deleted int64
	reasons []string
}

// prune deletes the oldest records that retention no longer keeps: the
// longest prefix older than MaxAge, then further prefixes until the used
// size is within MaxSize. In the same transaction it moves the anchor to
// the last deleted record and appends an EventRetention record, so the
// chain stays verifiable and the pruning itself is on it.
func (w *writer) prune() error {
	if w.s.opts.MaxAge == 0 && w.s.opts.MaxSize == 0 {
		return nil
	}
	var p pruning
	rec := prepare(Record{Event: EventRetention}, identity, false)
	err := w.commit([]*Record{rec}, func(tx *sql.Tx) error {
		if err := w.pruneByAge(tx, &p); err != nil {
			return err
		}
		if err := w.pruneBySize(tx, &p); err != nil {
			return err
		}
		if p.deleted == 0 {
			return errNothingToPrune
		}
		rec.Detail = map[string]string{
			"pruned":      strconv.FormatInt(p.deleted, 10),
			"through_seq": strconv.FormatInt(p.anchor.Seq, 10),
			"reason":      strings.Join(p.reasons, ","),
		}
		return w.setMeta(tx, metaAnchorSeq, strconv.FormatInt(p.anchor.Seq, 10), metaAnchorHash, p.anchor.Hash)
	})
	if errors.Is(err, errNothingToPrune) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pruning audit log: %w", err)
	}
	w.mirror([]*Record{rec})
	w.s.stats.pruned.Add(p.deleted)
	// Return the freed pages to the file system; failure only wastes space.
	if _, err := w.s.db.Exec(`PRAGMA incremental_vacuum`); err != nil {
		w.s.log.Warn("vacuuming audit log", "err", err)
	}
	return nil
}

// pruneLogged runs prune and logs its error; for the timer.
func (w *writer) pruneLogged() {
	if err := w.prune(); err != nil {
		w.s.stats.writeErrors.Add(1)
		w.s.log.Error("pruning audit log", "err", err)
	}
}

func (w *writer) pruneByAge(tx *sql.Tx, p *pruning) error {
	if w.s.opts.MaxAge == 0 {
		return nil
	}
	cutoff := time.Now().Add(-w.s.opts.MaxAge).UnixNano()
	// Only a prefix: deleting old records behind a newer one would leave
	// a hole Verify reports as deletion.
	var keep sql.NullInt64
	if err := tx.QueryRow(`SELECT MIN(seq) FROM audit_records WHERE time_ns >= ?`, cutoff).Scan(&keep); err != nil {
		return err
	}
	through := w.head.Seq
	if keep.Valid {
		through = keep.Int64 - 1
	}
	return deleteThrough(tx, through, "age", p)
}

func (w *writer) pruneBySize(tx *sql.Tx, p *pruning) error {
	if w.s.opts.MaxSize == 0 {
		return nil
	}
	for {
		used, err := usedBytes(tx)
		if err != nil || used <= w.s.opts.MaxSize {
			return err
		}
		var rows int64
		if err := tx.QueryRow(`SELECT COUNT(*) FROM audit_records`).Scan(&rows); err != nil {
			return err
		}
		if rows == 0 {
			// The rest is other tables (approvals) or overhead.
			return nil
		}
		var through int64
		if err := tx.QueryRow(`SELECT seq FROM audit_records ORDER BY seq LIMIT 1 OFFSET ?`,
			max(1, rows/10)-1).Scan(&through); err != nil {
			return err
		}
		if err := deleteThrough(tx, through, "size", p); err != nil {
			return err
		}
	}
}

// deleteThrough deletes records up to seq through and notes the anchor.
func deleteThrough(tx *sql.Tx, through int64, reason string, p *pruning) error {
	var last link
	err := tx.QueryRow(`SELECT seq, hash FROM audit_records WHERE seq <= ? ORDER BY seq DESC LIMIT 1`,
		through).Scan(&last.Seq, &last.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	res, err := tx.Exec(`DELETE FROM audit_records WHERE seq <= ?`, last.Seq)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	p.anchor, p.deleted = last, p.deleted+n
	if len(p.reasons) == 0 || p.reasons[len(p.reasons)-1] != reason {
		p.reasons = append(p.reasons, reason)
	}
	return nil
}

// usedBytes is the size of the database's pages in use.
func usedBytes(tx *sql.Tx) (int64, error) {
	var pages, free, size int64
	for _, q := range []struct {
		pragma string
		v      *int64
	}{{"page_count", &pages}, {"freelist_count", &free}, {"page_size", &size}} {
		if err := tx.QueryRow(`PRAGMA ` + q.pragma).Scan(q.v); err != nil {
			return 0, err
		}
	}
	return (pages - free) * size, nil
}
