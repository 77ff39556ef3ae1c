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
	"syscall"
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
	// checkEvery is how often an idle store checks that its file is still
	// there, so that calls are refused before they run (commits check too).
	checkEvery = time.Second
)

// writer is the state of the writer goroutine; only it touches the fields
// (newWriter runs before it starts).
type writer struct {
	s      *Store
	insert *sql.Stmt
	// metaRead (metaQuery) and metaSet (metaUpsert) are prepared once:
	// every commit reads the head and moves it.
	metaRead, metaSet *sql.Stmt
	head              link     // the last committed record
	headFile          *os.File // PATH.head, rewritten in place after each commit
	jsonl             *os.File // nil: no mirror
	jbuf              *bufio.Writer
	// integrity describes a head mismatch found by newWriter; "" if none.
	integrity string
	// file is the database file as opened: a commit checks that Path
	// still names it, since SQLite writes on into a deleted file.
	file os.FileInfo
}

func newWriter(s *Store) (*writer, error) {
	w := &writer{s: s}
	var err error
	if w.file, err = os.Stat(s.opts.Path); err != nil {
		return nil, err
	}
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
	if w.metaRead, err = s.db.Prepare(metaQuery); err != nil {
		w.close()
		return nil, fmt.Errorf("preparing meta query: %w", err)
	}
	if w.metaSet, err = s.db.Prepare(metaUpsert); err != nil {
		w.close()
		return nil, fmt.Errorf("preparing meta update: %w", err)
	}
	// O_NOFOLLOW: a link planted at the name between Open's check and
	// here is not written through either.
	w.headFile, err = os.OpenFile(headPath(s.opts.Path), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("opening head file: %w", err)
	}
	if s.opts.JSONL != "" {
		// Not through a link: one planted at the name would have the
		// records appended to whatever file it points to.
		// O_NONBLOCK: a FIFO at the name must not stop the open.
		w.jsonl, err = os.OpenFile(s.opts.JSONL, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
		if err == nil {
			if fi, serr := w.jsonl.Stat(); serr != nil || !fi.Mode().IsRegular() {
				w.close()
				return nil, fmt.Errorf("opening JSONL mirror: %s is not a regular file", s.opts.JSONL)
			}
			// A file of its own, or one of earlier records: not one that
			// holds something else, which the records would be appended to.
			var first [1]byte
			if n, _ := w.jsonl.ReadAt(first[:], 0); n == 1 && first[0] != '{' {
				w.close()
				return nil, fmt.Errorf("opening JSONL mirror: %s holds something other than audit records; name a file of its own", s.opts.JSONL)
			}
		}
		if err != nil {
			w.close()
			if target, lerr := os.Readlink(s.opts.JSONL); lerr == nil {
				return nil, fmt.Errorf("opening JSONL mirror: %s is a symlink (to %s); the audit does not append through a link: remove the link (not what it points to)", s.opts.JSONL, target)
			}
			if fi, lerr := os.Lstat(s.opts.JSONL); lerr == nil && !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("opening JSONL mirror: %s is not a regular file", s.opts.JSONL)
			}
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
	for _, st := range []*sql.Stmt{w.insert, w.metaRead, w.metaSet} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// run is the writer goroutine: it takes what is queued (up to maxBatch
// items without waiting), commits it as one transaction, answers markers,
// applies retention every pruneEvery and checks the file every checkEvery. It returns when the queue is
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
	check := time.NewTicker(checkEvery)
	defer check.Stop()
	batch := make([]item, 0, maxBatch)
	for {
		select {
		case <-check.C:
			if err := w.checkFile(); err != nil {
				w.fail(nil, nil, err)
			}
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
// unless someone waits for the batch (a Submit ticket, or a Flush, Close
// or Prune marker); false if the queue is closed. Without a linger,
// records queued while a commit runs still share the next one.
func (w *writer) fill(batch *[]item) bool {
	var linger <-chan time.Time
	for len(*batch) < maxBatch {
		if last := (*batch)[len(*batch)-1]; last.ack != nil || last.tk != nil {
			return w.take(batch) // someone waits: commit what is there now
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

// take appends what is queued now, without waiting; false if the queue
// is closed.
func (w *writer) take(batch *[]item) bool {
	for len(*batch) < maxBatch {
		select {
		case it, ok := <-w.s.queue:
			if !ok {
				return false
			}
			*batch = append(*batch, it)
		default:
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
	var err error
	if len(recs) > 0 {
		err = w.commit(recs, nil)
	}
	if err != nil {
		w.fail(batch, recs, err)
		return
	}
	// Calls wait on their tickets: release them before the side files.
	for i := range batch {
		if batch[i].tk != nil {
			batch[i].tk.settle(nil)
			batch[i].tk = nil
		}
	}
	if len(recs) > 0 {
		w.mirror(recs)
	}
	w.answer(batch, nil)
}

// answer settles the tickets and markers of batch with err; a prune
// marker runs retention first when err is nil.
func (w *writer) answer(batch []item, err error) {
	for _, it := range batch {
		switch {
		case it.tk != nil:
			it.tk.settle(err)
		case it.ack == nil:
		case it.prune && err == nil:
			it.ack <- w.prune()
		default:
			it.ack <- err
		}
	}
}

// fail handles a batch whose commit failed with err: the store turns
// failing (Err, Submit and Flush report it at once), the batch's waiters
// are told, and its records, with every record queued meanwhile (up to
// QueueSize; more are counted lost), are retried with backoff until a
// commit succeeds. Records committed this way are marked late, and an
// EventIntegrity record says what happened. After Close has begun it
// gives up after closeRetries attempts and counts the records lost.
func (w *writer) fail(batch []item, recs []*Record, err error) {
	s := w.s
	since := time.Now()
	ferr := s.setFailing(err)
	w.answer(batch, ferr)
	pending := make([]*Record, 0, len(recs)+1)
	for _, r := range recs {
		pending = append(pending, markLate(r, since))
	}
	var lost int64
	closingTries := 0
	for attempt := 1; ; attempt++ {
		s.stats.writeErrors.Add(1)
		if attempt <= 5 || attempt%30 == 0 { // then about once a minute
			s.log.Error("writing audit records; calls are refused until a write succeeds",
				"records", len(pending), "attempt", attempt, "err", err)
		}
		if s.closing.Load() {
			if closingTries++; closingTries > closeRetries {
				s.stats.lost.Add(int64(len(pending)) + lost)
				return
			}
		}
		wait := retryWait(attempt)
		if s.closing.Load() {
			wait = 50 * time.Millisecond
		}
		w.drain(&pending, &lost, since, ferr, wait)
		note := prepare(Record{Event: EventIntegrity, Error: fmt.Sprintf(
			"the audit store could not write from %s to %s (%v): %d records committed late, %d lost",
			since.UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano), err,
			len(pending), lost)}, s.opts.Redact, false)
		if err = w.commit(append(pending, note), nil); err == nil {
			w.mirror(append(pending, note))
			s.stats.late.Add(int64(len(pending)))
			s.stats.lost.Add(lost)
			s.setFailing(nil)
			s.log.Warn("audit store writes again; calls are accepted", "late", len(pending), "lost", lost)
			return
		}
		ferr = s.setFailing(err)
	}
}

// retryWait is the wait after the failed attempt of that number (from
// 1): 100 ms, doubling up to retryMax. The shift stops early: 50 ms
// shifted by 38 or more overflows into a wait of zero or less, which
// spun the loop (and its log) after about 70 s of failing.
func retryWait(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 8), retryMax)
}

// retryMax is the longest wait between two attempts of a failing store:
// how long calls stay refused after the cause (a full disk) is gone.
const retryMax = 2 * time.Second

// drain waits d, taking what is queued meanwhile: records join pending
// (marked late; past QueueSize they are counted in lost), and every
// waiter is told ferr at once.
func (w *writer) drain(pending *[]*Record, lost *int64, since time.Time, ferr error, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	queue := w.s.queue
	for {
		select {
		case it, ok := <-queue:
			if !ok {
				queue = nil // closed: Close waits for the last attempts
				continue
			}
			if it.rec != nil {
				if len(*pending) < w.s.opts.QueueSize {
					*pending = append(*pending, markLate(it.rec, since))
				} else {
					*lost++
					w.s.log.Error("audit record lost: the store cannot write and its backlog is full",
						"event", it.rec.Event, "tool", it.rec.Tool)
				}
			}
			w.answer([]item{it}, ferr)
		case <-t.C:
			return
		}
	}
}

// markLate notes on r that it was committed after a write failure, so
// that a reader knows its caller was told the audit failed.
func markLate(r *Record, since time.Time) *Record {
	if r.Detail == nil {
		r.Detail = map[string]string{}
	}
	r.Detail["audit_late"] = "committed after a write failure that began " + since.UTC().Format(time.RFC3339Nano)
	return r
}

// commit writes recs in one transaction, after pre (if non-nil) has run in
// it, chaining each to the one before and moving the head in audit_meta.
// The in-memory head moves only if the transaction commits; the caller
// then calls mirror.
func (w *writer) commit(recs []*Record, pre func(*sql.Tx) error) error {
	if err := w.checkFile(); err != nil {
		return err
	}
	tx, err := w.s.db.Begin()
	if err != nil {
		return fmt.Errorf("writing %s: %w", w.s.opts.Path, err)
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
		return fmt.Errorf("writing %s: %w", w.s.opts.Path, err)
	}
	for _, r := range recs {
		body := chainRecord(r, head)
		if _, err := stmt.Exec(r.Seq, r.Time.UnixNano(), r.Event, r.Client, r.Session, r.Sandbox,
			r.Server, r.Tool, r.Decision, r.PrevHash, r.Hash, body); err != nil {
			return fmt.Errorf("writing %s: %w", w.s.opts.Path, err)
		}
		head = link{r.Seq, r.Hash}
	}
	if err := w.setMeta(tx, metaHeadSeq, strconv.FormatInt(head.Seq, 10), metaHeadHash, head.Hash); err != nil {
		return fmt.Errorf("writing %s: %w", w.s.opts.Path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("writing %s: %w", w.s.opts.Path, err)
	}
	w.head = head
	// A file deleted or replaced during the commit took the batch with it.
	if err := w.checkFile(); err != nil {
		return err
	}
	w.s.stats.committed.Add(int64(len(recs)))
	w.s.signalCommit()
	return nil
}

// chainHead is the record to chain after, read inside the write
// transaction tx (IMMEDIATE: it holds the database's write lock), since
// another Store on the same file (another gateway on the state dir) may
// have committed since this one did: the chain stays one line. Only a head
// ahead of the database's is kept from memory: reconcileHead continues
// after a deleted end.
func (w *writer) chainHead(tx *sql.Tx) (link, error) {
	ctx := context.Background()
	meta, err := scanMeta(tx.StmtContext(ctx, w.metaRead).QueryContext(ctx))
	if err != nil {
		return link{}, err
	}
	if meta.head.Seq > w.head.Seq {
		return meta.head, nil
	}
	return w.head, nil
}

// checkFile returns an error wrapping ErrFileGone if the database path
// no longer names the file the store opened.
func (w *writer) checkFile() error {
	fi, err := os.Stat(w.s.opts.Path)
	if err == nil && os.SameFile(fi, w.file) {
		return nil
	}
	return fmt.Errorf("writing %s: %w", w.s.opts.Path, ErrFileGone)
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

// metaUpsert sets two keys of audit_meta (a link's seq and hash).
const metaUpsert = `INSERT INTO audit_meta (key, value) VALUES (?, ?), (?, ?)
	ON CONFLICT (key) DO UPDATE SET value = excluded.value`

// setMeta sets two keys of audit_meta in tx.
func (w *writer) setMeta(tx *sql.Tx, k1, v1, k2, v2 string) error {
	_, err := tx.Stmt(w.metaSet).Exec(k1, v1, k2, v2)
	return err
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
