package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// DefaultQueueSize is the Add queue length when Options.QueueSize is zero.
const DefaultQueueSize = 8192

// Options configures a Store.
type Options struct {
	// Path is the SQLite database file; required. It is created with mode
	// 0600 if missing; the WAL, shared-memory and PATH.head files follow.
	Path string
	// JSONL, if set, is a file to which each committed record is also
	// appended as one JSON line (created 0600). "": no mirror.
	JSONL string
	// QueueSize bounds the records waiting to be written. Zero means
	// DefaultQueueSize.
	QueueSize int
	// MaxAge prunes records older than this. Zero keeps them forever.
	MaxAge time.Duration
	// MaxSize prunes the oldest records while the database's used pages
	// ((page_count - freelist_count) * page_size, the approvals tables
	// included) exceed this many bytes. Zero means unlimited.
	MaxSize int64
	// IncludePayloads keeps Record.Payload (redacted, capped at
	// PayloadLimit). False: Add drops it.
	IncludePayloads bool
	// Redact is applied to every string field, ArgShape and Payload before
	// they are hashed and stored. Nil: identity (the caller has redacted).
	Redact func(string) string
	// Logger receives write errors and integrity warnings. Nil:
	// slog.Default().
	Logger *slog.Logger
	// BusyTimeout is how long Open and each commit wait for a lock held
	// by another connection or process. Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
}

// DefaultBusyTimeout is the lock wait when Options.BusyTimeout is zero.
const DefaultBusyTimeout = 10 * time.Second

// Store is the audit log writer. Add is safe for concurrent use; a single
// goroutine writes batches. The read methods are those of a Reader on the
// same file.
type Store struct {
	opts Options
	db   *sql.DB
	rd   *Reader
	w    *writer
	log  *slog.Logger

	mu     sync.RWMutex
	closed bool // guarded by mu; queue is closed once this is set
	queue  chan item

	// failing is the error of the last failed commit while no commit has
	// succeeded since; nil while the store writes.
	failing atomic.Pointer[error]

	closing   atomic.Bool   // Close has begun: the writer stops retrying soon
	done      chan struct{} // closed when the writer goroutine returns
	closeOnce sync.Once
	closeErr  error

	stats counters

	// commitMu guards commitSig, which is closed and replaced at each
	// commit so that Follow in this process sees a record at once rather
	// than at its next poll.
	commitMu  sync.Mutex
	commitSig chan struct{}
}

// committedSignal returns a channel closed at the next commit.
func (s *Store) committedSignal() <-chan struct{} {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if s.commitSig == nil {
		s.commitSig = make(chan struct{})
	}
	return s.commitSig
}

// signalCommit wakes the followers waiting on committedSignal.
func (s *Store) signalCommit() {
	s.commitMu.Lock()
	if s.commitSig != nil {
		close(s.commitSig)
		s.commitSig = nil
	}
	s.commitMu.Unlock()
}

// item is what the queue carries: a record (with a ticket if submitted),
// or a marker (ack non-nil) answered once everything before it is
// committed.
type item struct {
	rec   *Record
	tk    *Ticket
	ack   chan error
	prune bool // marker only: run retention before answering
}

// Ticket is the receipt of a submitted record.
type Ticket struct {
	done chan struct{}
	err  error // set before done is closed
}

// Wait returns nil once the record is committed, or an error wrapping
// ErrFailing if its batch failed (the record is then retried and
// committed late, or counted lost), ErrClosed if the store was closed, or
// ctx's error.
func (t *Ticket) Wait(ctx context.Context) error {
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Ticket) settle(err error) {
	t.err = err
	close(t.done)
}

// Stats counts what the store has done since Open.
type Stats struct {
	Added       int64 // Add calls that queued a record
	Waited      int64 // of those, calls that found the queue full and blocked
	Committed   int64 // records committed to the database
	Dropped     int64 // Add calls after Close (logged; nothing else to do)
	Lost        int64 // records given up at Close after repeated write errors, or past the backlog of a failing store
	Late        int64 // records committed after a write failure (their tickets had failed)
	WriteErrors int64 // failed batch commits, head-file and JSONL writes
	Pruned      int64 // records deleted by retention
}

type counters struct {
	added, waited, committed, dropped, lost, late, writeErrors, pruned atomic.Int64
}

// Open opens or creates the audit database and starts the writer.
func Open(opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, ErrNoPath
	}
	if opts.QueueSize < 0 || opts.MaxAge < 0 || opts.MaxSize < 0 {
		return nil, errors.New("opening audit store: negative QueueSize, MaxAge or MaxSize")
	}
	if opts.QueueSize == 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Redact == nil {
		opts.Redact = identity
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	// Not through a link: a state dir that another can shape (a cloned
	// repository's state_dir) could plant audit.db, SQLite's side files
	// or the head file as a link to a file of the user's, which the store
	// would then write; nor into a FIFO or device, which hangs or fails
	// with no word of why.
	for _, p := range []string{opts.Path, headPath(opts.Path), opts.Path + "-wal", opts.Path + "-shm", opts.Path + "-journal"} {
		if target, err := os.Readlink(p); err == nil {
			return nil, fmt.Errorf("opening audit store: %s is a symlink (to %s); the audit does not write through a link: remove the link (not what it points to)", p, target)
		}
		if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("opening audit store: %s is not a regular file (%s); remove it", p, fi.Mode().Type())
		}
	}
	s := &Store{opts: opts, log: opts.Logger, queue: make(chan item, opts.QueueSize), done: make(chan struct{})}
	if err := s.open(); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("opening audit store %s: %w", opts.Path, err)
	}
	if s.w.integrity != "" {
		s.log.Error("audit log integrity", "problem", s.w.integrity)
		s.Add(Record{Event: EventIntegrity, Error: s.w.integrity})
	}
	go s.run()
	return s, nil
}

func (s *Store) open() error {
	f, err := os.OpenFile(s.opts.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	// Immediate transactions take the write lock at BEGIN, so a writer
	// never fails to upgrade a read lock (SQLITE_BUSY despite the timeout)
	// when the approvals tables are written through DB at the same time.
	s.db, err = sql.Open("sqlite", dsn(s.opts.Path, fmt.Sprintf("_busy_timeout=%d", s.opts.BusyTimeout.Milliseconds()),
		"_auto_vacuum=INCREMENTAL", "_journal_mode=WAL", "_synchronous=NORMAL", "_txlock=immediate"))
	if err != nil {
		return err
	}
	if err := createSchema(s.db); err != nil {
		return err
	}
	if s.w, err = newWriter(s); err != nil {
		return err
	}
	s.rd, err = OpenReader(s.opts.Path)
	return err
}

// Schema. audit_records.body is the canonical JSON the hash covers; the
// other columns repeat fields of it for filtering (Verify checks they
// agree). audit_meta holds the schema version, the head and the anchor.
const (
	schemaVersion  = "1"
	metaVersion    = "schema_version"
	metaHeadSeq    = "head_seq"
	metaHeadHash   = "head_hash"
	metaAnchorSeq  = "anchor_seq"
	metaAnchorHash = "anchor_hash"
)

var schema = []string{
	`CREATE TABLE IF NOT EXISTS audit_records (
		seq       INTEGER PRIMARY KEY,
		time_ns   INTEGER NOT NULL,
		event     TEXT NOT NULL,
		client    TEXT NOT NULL,
		session   TEXT NOT NULL,
		sandbox   TEXT NOT NULL,
		server    TEXT NOT NULL,
		tool      TEXT NOT NULL,
		decision  TEXT NOT NULL,
		prev_hash TEXT NOT NULL,
		hash      TEXT NOT NULL,
		body      TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS audit_records_time ON audit_records (time_ns)`,
	`CREATE INDEX IF NOT EXISTS audit_records_session ON audit_records (session)`,
	`CREATE INDEX IF NOT EXISTS audit_records_server_tool ON audit_records (server, tool)`,
	`CREATE TABLE IF NOT EXISTS audit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
	`INSERT INTO audit_meta (key, value) VALUES ('` + metaVersion + `', '` + schemaVersion + `')
		ON CONFLICT (key) DO NOTHING`,
}

func createSchema(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("creating schema: %w", err)
	}
	defer tx.Rollback()
	for _, stmt := range schema {
		if _, err := tx.Exec(stmt); err != nil {
			return fmt.Errorf("creating schema: %w", err)
		}
	}
	return tx.Commit()
}

// Add queues r to be written. It returns at once unless the queue is full,
// then it blocks until there is room (backpressure: records are never
// dropped while the store is open and writing). Add copies r: the caller
// may reuse its slices and maps. The store sets Seq, PrevHash and Hash;
// Time if zero. Add after Close logs the loss and counts it in
// Stats.Dropped. The writer waits up to 10 ms for more records to commit
// with r; use Submit to wait for the commit.
func (s *Store) Add(r Record) {
	s.add(r, nil)
}

// Submit queues r like Add and returns a ticket whose Wait returns once r
// is committed. The writer commits a batch holding a submitted record at
// once, without waiting for more. While the store is failing (see Err) the
// ticket fails at once; r is still queued, to be committed late.
func (s *Store) Submit(r Record) *Ticket {
	tk := &Ticket{done: make(chan struct{})}
	s.add(r, tk)
	return tk
}

func (s *Store) add(r Record, tk *Ticket) {
	rec := prepare(r, s.opts.Redact, s.opts.IncludePayloads)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.stats.dropped.Add(1)
		s.log.Error("audit record added after close, not stored", "event", rec.Event, "tool", rec.Tool)
		if tk != nil {
			tk.settle(ErrClosed)
		}
		return
	}
	it := item{rec: rec, tk: tk}
	if err := s.Err(); err != nil && tk != nil {
		tk.settle(err)
		it.tk = nil
	}
	select {
	case s.queue <- it:
	default:
		s.stats.waited.Add(1)
		s.queue <- it
	}
	s.stats.added.Add(1)
}

// Err returns nil while the store writes, and an error wrapping
// ErrFailing and the cause (naming the file) from a failed commit until
// the next successful one. The writer retries every few seconds at most.
func (s *Store) Err() error {
	if p := s.failing.Load(); p != nil {
		return *p
	}
	return nil
}

// setFailing enters the failing state with cause, or leaves it if cause
// is nil, and returns what Err returns.
func (s *Store) setFailing(cause error) error {
	if cause == nil {
		s.failing.Store(nil)
		return nil
	}
	err := fmt.Errorf("%w: %w", ErrFailing, cause)
	s.failing.Store(&err)
	return err
}

// Flush waits until every record added before it is committed, and
// returns the commit error of the batch that held them, if it was given up.
func (s *Store) Flush(ctx context.Context) error {
	return s.mark(ctx, false)
}

// Prune applies retention now (it also runs at Open and every minute).
func (s *Store) Prune(ctx context.Context) error {
	return s.mark(ctx, true)
}

func (s *Store) mark(ctx context.Context, prune bool) error {
	ack := make(chan error, 1)
	if err := s.enqueue(ctx, item{ack: ack, prune: prune}); err != nil {
		return err
	}
	select {
	case err := <-ack:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) enqueue(ctx context.Context, it item) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.queue <- it:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes everything queued, stops the writer and closes the files.
// It is idempotent; later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.mu.Lock()
		s.closed = true
		close(s.queue)
		s.mu.Unlock()
		<-s.done
		s.closeErr = s.closeFiles()
		if n := s.stats.lost.Load(); n > 0 {
			s.closeErr = errors.Join(fmt.Errorf("closing audit store: %d records lost to write errors", n), s.closeErr)
		}
	})
	return s.closeErr
}

func (s *Store) closeFiles() error {
	var errs []error
	if s.w != nil {
		errs = append(errs, s.w.close())
	}
	if s.rd != nil {
		errs = append(errs, s.rd.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	return errors.Join(errs...)
}

// DB is the store's read-write database handle, for packages that keep
// their own tables in the same file (approvals). Transactions on it are
// IMMEDIATE. It is closed by Close.
func (s *Store) DB() *sql.DB { return s.db }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{
		Added: c.added.Load(), Waited: c.waited.Load(), Committed: c.committed.Load(),
		Dropped: c.dropped.Load(), Lost: c.lost.Load(), Late: c.late.Load(), WriteErrors: c.writeErrors.Load(),
		Pruned: c.pruned.Load(),
	}
}

// Query is Reader.Query on the store's file.
func (s *Store) Query(ctx context.Context, f Filter) ([]Record, error) { return s.rd.Query(ctx, f) }

// Follow is Reader.Follow on the store's file, woken at once by this
// store's own commits (and by others', on the file, at the poll).
func (s *Store) Follow(ctx context.Context, f Filter, each func(Record) error) error {
	return s.rd.follow(ctx, f, each, s.committedSignal)
}

// Verify is Reader.Verify on the store's file. Records still queued are
// not part of it; Flush first to include them.
func (s *Store) Verify(ctx context.Context) (Report, error) { return s.rd.Verify(ctx) }
