package audit

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FollowInterval is how often Follow polls for new records.
const FollowInterval = 200 * time.Millisecond

// followPage bounds how many records one Follow poll reads.
const followPage = 1000

// Filter selects records. Zero fields match everything.
type Filter struct {
	Client, Server, Tool, Sandbox, Decision, Event, Session string

	// ToolName selects records whose tool is ToolName as clients call it
	// (github__create_issue) or as its server calls it (create_issue).
	ToolName string

	Since    time.Time // records with Time at or after Since
	AfterSeq int64     // records with Seq above AfterSeq
	Limit    int       // at most this many (the oldest first); 0: no limit. Follow ignores it.
}

// Reader reads an audit database, also while another process writes it.
// It is safe for concurrent use.
type Reader struct {
	db   *sql.DB
	path string
}

// OpenReader opens the audit database at path read-only. The database
// must exist and carry the audit schema.
func OpenReader(path string) (*Reader, error) {
	if path == "" {
		return nil, ErrNoPath
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path, "mode=ro", "_busy_timeout=5000", "_query_only=1"))
	if err != nil {
		return nil, fmt.Errorf("opening audit log %s: %w", path, err)
	}
	r := &Reader{db: db, path: path}
	if _, err := readMeta(context.Background(), db); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening audit log %s: %w", path, err)
	}
	return r, nil
}

// DB is the reader's database handle, read-only (query_only): for the
// approval tables that share the file (approval.RememberedIn).
func (r *Reader) DB() *sql.DB { return r.db }

// dsn is the driver's name for path: a file: URI (so "?" or "#" in the
// path cannot be taken for parameters) with the given parameters.
func dsn(path string, params ...string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	u := url.URL{Path: abs}
	return "file:" + u.EscapedPath() + "?" + strings.Join(params, "&")
}

// Close closes the reader.
func (r *Reader) Close() error { return r.db.Close() }

// Verify checks the hash chain from the retention anchor to the head; see
// the package documentation. An error means it could not check; problems
// found are in the Report.
func (r *Reader) Verify(ctx context.Context) (Report, error) {
	return verify(ctx, r.db, r.path)
}

// Query returns the records that match f, ordered by seq.
func (r *Reader) Query(ctx context.Context, f Filter) ([]Record, error) {
	where, args := f.where()
	q := `SELECT ` + rowColumns + ` FROM audit_records` + where + ` ORDER BY seq`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return r.queryRecords(ctx, q, args...)
}

// Unknown names each of f's decision, server and client that no record
// has, with those the log does have, so that a filter on one (a typo, a
// server since renamed) does not look like a log with no such records.
// Decisions are not refused up front: many parts write them, and they
// are not one set.
func (r *Reader) Unknown(ctx context.Context, f Filter) []string {
	var out []string
	for _, fl := range []struct{ name, column, value string }{
		{"decision", "decision", f.Decision}, {"server", "server", f.Server}, {"client", "client", f.Client},
	} {
		if fl.value == "" {
			continue
		}
		have, err := r.distinct(ctx, `SELECT DISTINCT `+fl.column+` FROM audit_records WHERE `+fl.column+` != '' ORDER BY `+fl.column)
		if err == nil && !slices.Contains(have, fl.value) {
			out = append(out, fmt.Sprintf("--%s %q: no record has it yet; the %ss in this log are %s", fl.name, fl.value, fl.name, cmp.Or(strings.Join(have, ", "), "none")))
		}
	}
	return out
}

// distinct runs q, a SELECT of one text column, and returns its values.
func (r *Reader) distinct(ctx context.Context, q string) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("querying audit log: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("querying audit log: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("querying audit log: %w", err)
	}
	return out, nil
}

// queryRecords runs q, a SELECT of rowColumns, and decodes its rows.
func (r *Reader) queryRecords(ctx context.Context, q string, args ...any) ([]Record, error) {
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("querying audit log: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var row storedRow
		if err := row.scan(rows); err != nil {
			return nil, fmt.Errorf("querying audit log: %w", err)
		}
		rec, err := row.record()
		if err != nil {
			return nil, fmt.Errorf("querying audit log: seq %d: %w", row.seq, err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("querying audit log: %w", err)
	}
	return out, nil
}

// Follow calls each for every record matching f, in seq order: first those
// already stored, then new ones as they are committed, polling every
// FollowInterval (Store.Follow is also woken by its own commits), until ctx ends (it then returns ctx.Err()) or each
// returns an error (which it returns).
func (r *Reader) Follow(ctx context.Context, f Filter, each func(Record) error) error {
	return r.follow(ctx, f, each, nil)
}

// follow is Follow, woken also by the channel wake returns (taken before
// each query, so that a commit between the query and the wait is not
// missed); wake may be nil.
func (r *Reader) follow(ctx context.Context, f Filter, each func(Record) error, wake func() <-chan struct{}) error {
	f.Limit = followPage
	tick := time.NewTicker(FollowInterval)
	defer tick.Stop()
	for {
		var woken <-chan struct{} // nil: never
		if wake != nil {
			woken = wake()
		}
		recs, err := r.Query(ctx, f)
		if err != nil && ctx.Err() == nil {
			return err
		}
		for _, rec := range recs {
			if err := each(rec); err != nil {
				return err
			}
			f.AfterSeq = rec.Seq
		}
		if len(recs) == followPage {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-woken:
		}
	}
}

// SetTool reads `logs --tool ARG`: SERVER/TOOL selects by Server and
// Tool, any other ARG by ToolName.
func (f *Filter) SetTool(arg string) {
	if s, t, found := strings.Cut(arg, "/"); found {
		f.Server, f.Tool = s, t
		return
	}
	f.ToolName = arg
}

// ParseSince reads `logs --since`: a duration before now (1h) or an
// RFC 3339 time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration ago cannot be negative (1h is an hour ago)", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (1h) nor an RFC 3339 time", s)
	}
	return t, nil
}

func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	for _, c := range []struct{ col, val string }{
		{"client", f.Client}, {"server", f.Server}, {"tool", f.Tool},
		{"sandbox", f.Sandbox}, {"decision", f.Decision}, {"event", f.Event},
		{"session", f.Session},
	} {
		if c.val != "" {
			conds = append(conds, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	if f.ToolName != "" {
		conds = append(conds, "(tool = ? OR json_extract(body, '$.name') = ?)")
		args = append(args, f.ToolName, f.ToolName)
	}
	if !f.Since.IsZero() {
		conds = append(conds, "time_ns >= ?")
		args = append(args, f.Since.UnixNano())
	}
	if f.AfterSeq > 0 {
		conds = append(conds, "seq > ?")
		args = append(args, f.AfterSeq)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// rowColumns are the columns storedRow.scan reads, in its order.
const rowColumns = `seq, time_ns, event, client, session, sandbox, server, tool, decision, prev_hash, hash, body`

// storedRow is one row of audit_records as stored.
type storedRow struct {
	seq, timeNS                                             int64
	event, client, session, sandbox, server, tool, decision string
	prevHash, hash, body                                    string
}

func (row *storedRow) scan(rows *sql.Rows) error {
	return rows.Scan(&row.seq, &row.timeNS, &row.event, &row.client, &row.session,
		&row.sandbox, &row.server, &row.tool, &row.decision, &row.prevHash, &row.hash, &row.body)
}

// record decodes the hashed body and adds the hash.
func (row *storedRow) record() (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(row.body), &r); err != nil {
		return Record{}, fmt.Errorf("decoding record: %w", err)
	}
	r.Hash = row.hash
	return r, nil
}

// metaState is what the audit_meta table holds.
type metaState struct {
	head, anchor link
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// metaQuery reads audit_meta.
const metaQuery = `SELECT key, value FROM audit_meta`

// readMeta reads audit_meta and checks the schema version.
func readMeta(ctx context.Context, q querier) (metaState, error) {
	rows, err := q.QueryContext(ctx, metaQuery)
	return scanMeta(rows, err)
}

// scanMeta reads the rows of metaQuery (or returns err, the query's) and
// checks the schema version. It closes rows.
func scanMeta(rows *sql.Rows, err error) (metaState, error) {
	if err != nil {
		return metaState{}, fmt.Errorf("reading audit meta: %w", err)
	}
	defer rows.Close()
	kv := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return metaState{}, fmt.Errorf("reading audit meta: %w", err)
		}
		kv[k] = v
	}
	if err := rows.Err(); err != nil {
		return metaState{}, fmt.Errorf("reading audit meta: %w", err)
	}
	if kv[metaVersion] != schemaVersion {
		return metaState{}, fmt.Errorf("%w %q", ErrSchema, kv[metaVersion])
	}
	var m metaState
	m.head, err = parseLink(kv[metaHeadSeq], kv[metaHeadHash])
	if err == nil {
		m.anchor, err = parseLink(kv[metaAnchorSeq], kv[metaAnchorHash])
	}
	return m, err
}

func parseLink(seq, hash string) (link, error) {
	if seq == "" {
		return link{}, nil
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return link{}, errors.New("reading audit meta: malformed seq")
	}
	return link{n, hash}, nil
}
