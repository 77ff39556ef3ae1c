package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// chainHash is the hash of a record: hex SHA-256 over the previous
// record's hash (hex text, "" for the first record) followed by the
// record's canonical bytes.
func chainHash(prev string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// link is a position in the chain: a record's seq and hash.
type link struct {
	Seq  int64
	Hash string
}

// headFileLen is the fixed size of the head side file, "%020d %64s\n",
// so each update is one write at offset 0 of an open file.
const headFileLen = 20 + 1 + 64 + 1

func headPath(dbPath string) string { return dbPath + ".head" }

func encodeHead(h link) []byte {
	return fmt.Appendf(nil, "%020d %64s\n", h.Seq, h.Hash)
}

// readHead reads the head side file; ok is false if it does not exist.
func readHead(path string) (h link, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return link{}, false, nil
	}
	if err == nil && len(b) == 0 {
		// Open creates it empty; the writer fills it after its first
		// commit, so a reader may see records and no head yet: like a
		// head one batch behind, that is no problem.
		return link{}, true, nil
	}
	if err != nil {
		return link{}, false, fmt.Errorf("reading head file: %w", err)
	}
	seq, hash, found := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, perr := strconv.ParseInt(seq, 10, 64)
	if !found || perr != nil || len(strings.TrimSpace(hash)) != 64 {
		return link{}, true, fmt.Errorf("reading head file %s: malformed", path)
	}
	return link{n, strings.TrimSpace(hash)}, true, nil
}

// Report is the result of Verify.
type Report struct {
	Records     int64    // records checked
	First, Last int64    // seq of the first and last record; 0 if none
	Anchor      int64    // seq of the last pruned record; 0 if none
	Head        string   // hash of the last record, to anchor elsewhere; "" if none
	Problems    []string // each names a seq and what is wrong; empty: intact
}

// OK reports whether Verify found nothing wrong.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// String is the report's one-line conclusion, as logs verify prints it
// after the problems.
func (r Report) String() string {
	switch {
	case !r.OK():
		return fmt.Sprintf("audit log: %d problem(s) in %d records", len(r.Problems), r.Records)
	case r.Head == "":
		return fmt.Sprintf("audit log: %d records, chain intact (seq %d..%d)", r.Records, r.First, r.Last)
	}
	return fmt.Sprintf("audit log: %d records, chain intact (seq %d..%d), head %s (keep a copy elsewhere to anchor it)", r.Records, r.First, r.Last, r.Head)
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// verify walks the chain from the retention anchor to the end in one read
// transaction and compares the end with the head in the meta table and in
// the side file. The side file is read first: the writer updates it only
// after a commit, so a snapshot taken later is never behind it.
func verify(ctx context.Context, db *sql.DB, path string) (Report, error) {
	file, haveFile, err := readHead(headPath(path))
	if err != nil && !haveFile {
		return Report{}, err
	}
	var rep Report
	if err != nil {
		rep.problem("head file unreadable: %v", err)
		haveFile = false
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Report{}, fmt.Errorf("verifying: %w", err)
	}
	defer tx.Rollback()
	meta, err := readMeta(ctx, tx)
	if err != nil {
		return Report{}, err
	}
	rep.Anchor = meta.anchor.Seq
	last, fileHash, err := walkChain(ctx, tx, meta.anchor, &rep, file.Seq)
	if err != nil {
		return Report{}, err
	}
	rep.Head = last.Hash
	checkHead(&rep, "meta head", meta.head, last)
	switch {
	case !haveFile && last.Seq > 0:
		rep.problem("head file missing (records may have been deleted at the end)")
	case haveFile && file.Seq > last.Seq:
		checkHead(&rep, "head file", file, last)
	case haveFile && file.Seq > meta.anchor.Seq && fileHash != file.Hash:
		rep.problem("seq %d: head file hash differs from the record (record replaced)", file.Seq)
	}
	return rep, nil
}

func checkHead(rep *Report, what string, head, last link) {
	switch {
	case head.Seq > last.Seq:
		rep.problem("seq %d: head mismatch (records deleted at the end): %s is seq %d, last record %d",
			last.Seq+1, what, head.Seq, last.Seq)
	case head.Seq < last.Seq:
		rep.problem("seq %d: head mismatch (records added after the head): %s is seq %d, last record %d",
			head.Seq+1, what, head.Seq, last.Seq)
	case head.Hash != last.Hash:
		rep.problem("seq %d: head mismatch (last record replaced): %s hash differs", last.Seq, what)
	}
}

// walkChain checks each record against its predecessor. It returns the
// last link (the anchor if there are no records) and the hash of the
// record at seq want (the side file's head), "" if absent.
func walkChain(ctx context.Context, tx *sql.Tx, anchor link, rep *Report, want int64) (last link, wantHash string, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+rowColumns+` FROM audit_records ORDER BY seq`)
	if err != nil {
		return link{}, "", fmt.Errorf("verifying: %w", err)
	}
	defer rows.Close()
	next, prev := anchor.Seq+1, anchor.Hash
	for rows.Next() {
		var row storedRow
		if err := row.scan(rows); err != nil {
			return link{}, "", fmt.Errorf("verifying: %w", err)
		}
		switch {
		case row.seq != next:
			rep.problem("gap %d..%d (records deleted)", next, row.seq-1)
		case row.prevHash != prev:
			rep.problem("seq %d: previous hash mismatch (record %d edited or replaced)", row.seq, row.seq-1)
		}
		if msg := row.check(); msg != "" {
			rep.problem("seq %d: %s", row.seq, msg)
		}
		if row.seq == want {
			wantHash = row.hash
		}
		if rep.Records == 0 {
			rep.First = row.seq
		}
		rep.Records++
		rep.Last = row.seq
		next, prev = row.seq+1, row.hash
	}
	return link{next - 1, prev}, wantHash, rows.Err()
}

// check compares a stored row with itself: the hash over its body, and
// the indexed columns against the hashed body.
func (row *storedRow) check() string {
	if chainHash(row.prevHash, []byte(row.body)) != row.hash {
		return "hash mismatch (record edited)"
	}
	r, err := row.record()
	if err != nil {
		return "undecodable body (record edited)"
	}
	if r.Seq != row.seq || r.PrevHash != row.prevHash || r.Time.UnixNano() != row.timeNS ||
		r.Event != row.event || r.Client != row.client || r.Session != row.session ||
		r.Sandbox != row.sandbox || r.Server != row.server || r.Tool != row.tool ||
		r.Decision != row.decision {
		return "columns differ from the hashed record (record edited)"
	}
	return ""
}
