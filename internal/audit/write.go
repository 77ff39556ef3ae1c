package audit

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// maxBatch bounds the records committed in one transaction.
	maxBatch = 1024
	// batchLinger is how long the writer waits for more records after the
	// first of a batch: one commit (and fsync) per few calls instead of
	// per call, so that a busy gateway's audit costs little CPU and disk.
	// A crash may lose this much more of what was queued.
	batchLinger = 10 * time.Millisecond
	// closeRetries is how often a failing batch is tried once Close has
	// begun, before its records are counted lost.
	closeRetries = 3
	// pruneEvery is how often retention runs while the store is open.
	pruneEvery = time.Minute
)

// writer is the state of the writer goroutine; only it touches the fields
// (newWriter runs before it starts).
type writer struct {
	s        *Store
	insert   *sql.Stmt
	head     link     // the last committed record
	headFile *os.File // PATH.head, rewritten in place after each commit
	jsonl    *os.File // nil: no mirror
	jbuf     *bufio.Writer
	// integrity describes a head mismatch found by newWriter; "" if none.
	integrity string
}

func newWriter(s *Store) (*writer, error) {
	w := &writer{s: s}
	meta, err := readMeta(context.Background(), s.db)
	if err != nil {
		return nil, err
	}
	w.head, w.integrity = reconcileHead(meta.head, headPath(s.opts.Path))
	w.insert, err = s.db.Prepare(`INSERT INTO audit_records (` + rowColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("preparing insert: %w", err)
	}
	w.headFile, err = os.OpenFile(headPath(s.opts.Path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("opening head file: %w", err)
	}
	if s.opts.JSONL != "" {
		w.jsonl, err = os.OpenFile(s.opts.JSONL, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("opening JSONL mirror: %w", err)
		}
		w.jbuf = bufio.NewWriterSize(w.jsonl, 64<<10)
	}
	return w, nil
}

// reconcileHead picks the head to continue the chain from. The meta table
// is written in the same transaction as the records; the side file just
// after. A side file behind the meta head is what a crash between the two
// leaves. One ahead means records were deleted at the end while the store
// was closed: the chain continues after the side file's head, so Verify
// keeps showing the deleted range as a gap.
func reconcileHead(meta link, path string) (link, string) {
	file, ok, err := readHead(path)
	switch {
	case err != nil:
		return meta, err.Error()
	case !ok && meta.Seq > 0:
		return meta, fmt.Sprintf("head file missing; database head is seq %d", meta.Seq)
	case !ok || file.Seq < meta.Seq:
		return meta, ""
	case file.Seq > meta.Seq:
		return file, fmt.Sprintf("records deleted at the end: head file is seq %d, database head seq %d", file.Seq, meta.Seq)
	case file.Hash != meta.Hash:
		return meta, fmt.Sprintf("seq %d: head file hash differs from the database head", file.Seq)
	}
	return meta, ""
}

func (w *writer) close() error {
	var errs []error
	if w.jbuf != nil {
		errs = append(errs, w.jbuf.Flush())
	}
	if w.jsonl != nil {
		errs = append(errs, w.jsonl.Close())
	}
	if w.headFile != nil {
		errs = append(errs, w.headFile.Close())
	}
	if w.insert != nil {
		errs = append(errs, w.insert.Close())
	}
	return errors.Join(errs...)
}

// run is the writer goroutine: it takes what is queued (up to maxBatch
// items without waiting), commits it as one transaction, answers markers,
// and applies retention every pruneEvery. It returns when the queue is
// closed and drained.
func (s *Store) run() {
	defer close(s.done)
	w := s.w
	var tick <-chan time.Time
	if s.opts.MaxAge > 0 || s.opts.MaxSize > 0 {
		w.pruneLogged()
		t := time.NewTicker(pruneEvery)
		defer t.Stop()
		tick = t.C
	}
	batch := make([]item, 0, maxBatch)
	for {
		select {
		case it, ok := <-s.queue:
			if !ok {
				return
			}
			batch = append(batch[:0], it)
			open := w.fill(&batch)
			w.handle(batch)
			if !open {
				return
			}
		case <-tick:
			w.pruneLogged()
		}
	}
}

// fill appends queued items to batch, waiting up to batchLinger for more
// unless someone waits for the batch (a Flush, Close or Prune marker);
// false if the queue is closed.
func (w *writer) fill(batch *[]item) bool {
	var linger <-chan time.Time
	for len(*batch) < maxBatch {
		if (*batch)[len(*batch)-1].ack != nil {
			return true // a marker: commit now
		}
		select {
		case it, ok := <-w.s.queue:
			if !ok {
				return false
			}
			*batch = append(*batch, it)
			continue
		default:
		}
		if linger == nil {
			t := time.NewTimer(batchLinger)
			defer t.Stop()
			linger = t.C
		}
		select {
		case it, ok := <-w.s.queue:
			if !ok {
				return false
			}
			*batch = append(*batch, it)
		case <-linger:
			return true
		}
	}
	return true
}

func (w *writer) handle(batch []item) {
	recs := make([]*Record, 0, len(batch))
	for _, it := range batch {
		if it.rec != nil {
			recs = append(recs, it.rec)
		}
	}
	err := w.commitRetrying(recs)
	for _, it := range batch {
		switch {
		case it.ack == nil:
		case it.prune && err == nil:
			it.ack <- w.prune()
		default:
			it.ack <- err
		}
	}
}

// commitRetrying commits recs, retrying with backoff while the store is
// open: Add then blocks once the queue fills, so calls stop rather than go
// unaudited. After Close has begun it gives up after closeRetries.
func (w *writer) commitRetrying(recs []*Record) error {
	if len(recs) == 0 {
		return nil
	}
	for attempt := 1; ; attempt++ {
		err := w.commit(recs, nil)
		if err == nil {
			return nil
		}
		w.s.stats.writeErrors.Add(1)
		w.s.log.Error("writing audit records", "records", len(recs), "attempt", attempt, "err", err)
		if w.s.closing.Load() && attempt >= closeRetries {
			w.s.stats.lost.Add(int64(len(recs)))
			return fmt.Errorf("writing %d audit records: %w", len(recs), err)
		}
		time.Sleep(min(50*time.Millisecond<<attempt, 2*time.Second))
	}
}

// commit writes recs in one transaction, after pre (if non-nil) has run in
// it, chaining each to the one before and moving the head in audit_meta.
// The in-memory head moves only if the transaction commits; then the side
// file and the JSONL mirror follow.
func (w *writer) commit(recs []*Record, pre func(*sql.Tx) error) error {
	tx, err := w.s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if pre != nil {
		if err := pre(tx); err != nil {
			return err
		}
	}
	stmt := tx.Stmt(w.insert)
	head, err := w.chainHead(tx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		body := chainRecord(r, head)
		if _, err := stmt.Exec(r.Seq, r.Time.UnixNano(), r.Event, r.Client, r.Session, r.Sandbox,
			r.Server, r.Tool, r.Decision, r.PrevHash, r.Hash, body); err != nil {
			return err
		}
		head = link{r.Seq, r.Hash}
	}
	if err := setMeta(tx, metaHeadSeq, fmt.Sprint(head.Seq), metaHeadHash, head.Hash); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	w.head = head
	w.s.stats.committed.Add(int64(len(recs)))
	w.mirror(recs)
	return nil
}

// chainHead is the record to chain after, read inside the write
// transaction tx (IMMEDIATE: it holds the database's write lock), since
// another Store on the same file (another gateway on the state dir) may
// have committed since this one did: the chain stays one line. Only a head
// ahead of the database's is kept from memory: reconcileHead continues
// after a deleted end.
func (w *writer) chainHead(tx *sql.Tx) (link, error) {
	meta, err := readMeta(context.Background(), tx)
	if err != nil {
		return link{}, err
	}
	if meta.head.Seq > w.head.Seq {
		return meta.head, nil
	}
	return w.head, nil
}

// chainRecord gives r its place after prev and returns its canonical
// bytes. A record that cannot be encoded (prepare makes that unexpected)
// is replaced by one that says so, so the event is not lost silently.
func chainRecord(r *Record, prev link) []byte {
	r.Seq, r.PrevHash, r.Hash = prev.Seq+1, prev.Hash, ""
	body, err := canonical(*r)
	if err != nil {
		*r = Record{Seq: r.Seq, Time: r.Time, Event: r.Event, PrevHash: r.PrevHash,
			Error: "encoding audit record: " + err.Error()}
		body, _ = canonical(*r) // only strings and a valid time: cannot fail
	}
	r.Hash = chainHash(r.PrevHash, body)
	return body
}

func setMeta(tx *sql.Tx, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if _, err := tx.Exec(`INSERT INTO audit_meta (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, kv[i], kv[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// mirror writes the head side file and appends recs to the JSONL mirror.
// Their failures are logged and counted; the database already holds recs.
func (w *writer) mirror(recs []*Record) {
	if err := w.writeHead(); err != nil {
		w.s.stats.writeErrors.Add(1)
		w.s.log.Error("writing audit head file", "err", err)
	}
	if w.jbuf == nil {
		return
	}
	for _, r := range recs {
		b, err := r.MarshalJSON()
		if err == nil {
			w.jbuf.Write(b)
			err = w.jbuf.WriteByte('\n')
		}
		if err != nil {
			w.s.stats.writeErrors.Add(1)
			w.s.log.Error("writing audit JSONL mirror", "seq", r.Seq, "err", err)
		}
	}
	if err := w.jbuf.Flush(); err != nil {
		w.s.stats.writeErrors.Add(1)
		w.s.log.Error("writing audit JSONL mirror", "err", err)
	}
}

// writeHead writes the head side file, unless another Store on the file
// has written a later head meanwhile: under an flock, so that the side
// file never moves back behind a record the database holds.
func (w *writer) writeHead() error {
	fd := int(w.headFile.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return err
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	buf := make([]byte, headFileLen)
	n, err := w.headFile.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	// "%020d %64s\n" (encodeHead); anything else is overwritten.
	if n == headFileLen {
		if seq, err := strconv.ParseInt(string(buf[:20]), 10, 64); err == nil && seq > w.head.Seq {
			return nil
		}
	}
	_, err = w.headFile.WriteAt(encodeHead(w.head), 0)
	return err
}
