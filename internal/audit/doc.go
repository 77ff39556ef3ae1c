// Package audit is mcpbox's audit log: one record per tool call and per
// session, sandbox, egress, approval, policy, pin, trust and scan event,
// kept in a SQLite file (the pure-Go modernc.org/sqlite driver; no cgo),
// hash-chained so that edits and deletions show, pruned by age and size,
// optionally mirrored to a JSON-lines file.
//
// # What is recorded
//
// Metadata only, by default: who (client, session), where (sandbox,
// workspace, server, tool), what was decided and by which rule, how long
// it took, how it ended, sizes, file paths and digests, egress hosts and
// byte counts, packages, scanner findings. The arguments appear only as
// their Shape (keys, types, sizes, never values). Prompts, argument values,
// results, file contents and tokens are not stored unless
// Options.IncludePayloads is set; then Record.Payload is kept, redacted and
// capped at PayloadLimit. Options.Redact is applied to every string of a
// record, ArgShape and Payload included, in Add, before anything is hashed,
// queued for disk or mirrored.
//
// # Writing
//
// Add copies and redacts the record and puts it on a bounded queue
// (Options.QueueSize); it does not touch the disk. When the queue is full
// Add blocks until there is room: records are not dropped while the store
// is open and writing, and Stats.Waited counts the Adds that had to wait.
// Submit does the same and returns a Ticket whose Wait returns once the
// record is committed: the guard releases a call's result only then. One
// writer goroutine takes up to 1024 queued records at a time, waiting up
// to 10 ms after the first for more (not when a Submit, Flush or Close
// waits: records queued during a commit share the next one), and commits
// them in one transaction (WAL mode, synchronous=NORMAL, busy_timeout
// Options.BusyTimeout). A commit is in the WAL file when it returns, so it
// survives mcpbox being killed; the WAL is synced at checkpoints, not per
// commit, which keeps a guarded call from waiting for a disk sync.
//
// # Failing closed
//
// Before and after each commit, and every second while idle, the writer
// checks that the path still names the file it opened (SQLite writes on
// into a deleted file). If a
// commit fails (disk full, a lock held by another process past the busy
// timeout, I/O error, file deleted or replaced), the store is failing: the
// tickets and Flushes of that batch, and every Submit until a commit
// succeeds, get an error wrapping ErrFailing and the cause, which names the
// file; Err reports it, so that callers refuse work at once. The writer
// keeps the failed records and those queued meanwhile (up to QueueSize;
// more are counted in Stats.Lost and logged), marks them
// Detail["audit_late"], and retries with backoff (at most retryMax apart).
// The first commit that succeeds writes them with an EventIntegrity record
// saying how long writing failed and how many records were late or lost,
// and ends the failing state. A deleted database never recovers: the store
// stays failing until it is reopened. Close drains the queue, commits it
// and closes the files (three attempts per batch once closing; records
// still failing are counted in Stats.Lost and Close returns an error).
// Open refuses a file it cannot use (not a database, locked past the busy
// timeout, unreadable) with an error naming it.
//
// # What an unclean stop can lose
//
// A crash or kill loses the records still in the queue and the batch being
// committed: at most QueueSize + 1024 records, in practice the last 10 ms
// or so of events; never a submitted record whose Wait returned nil.
// Committed batches survive a process crash (kill, OOM, panic). A power
// failure or kernel crash may lose the batches committed since the last
// checkpoint (synchronous=NORMAL); when the head side file outlived them,
// Verify reports them as missing at the end. The head side file and the JSONL
// mirror are written just after each commit, so a crash can leave them
// one batch behind the database; the next Open accepts a side file that is
// behind and rewrites it.
//
// # Schema
//
//	audit_records(seq INTEGER PRIMARY KEY, time_ns, event, client, session,
//	              sandbox, server, tool, decision, prev_hash, hash, body)
//	audit_meta(key TEXT PRIMARY KEY, value)  -- schema_version, head_seq,
//	              head_hash, anchor_seq, anchor_hash
//
// body is the record's canonical JSON; the other columns repeat some of its
// fields for filtering, with indexes on time_ns, session and (server,
// tool). Other packages (approvals) keep their own tables in the same file
// through Store.DB; the audit tables are prefixed audit_.
//
// # Hash chain
//
// A record's canonical form is its JSON encoding (Record.MarshalJSON:
// encoding/json with the fields in declaration order, map keys sorted,
// Time in UTC RFC 3339 with nanoseconds, duration_ms as the shortest float
// of milliseconds, placed after the other fields) without "hash". It
// includes seq and prev_hash. Hash is the hex SHA-256 of PrevHash (hex
// text; "" for seq 1) followed by the canonical bytes. The stored body is
// exactly the hashed bytes, so Verify checks what is on disk and does not
// depend on re-encoding.
//
// Verify walks the records from the retention anchor in one read
// transaction and reports, each with its seq: a body that does not match
// its hash or columns that disagree with the body ("hash mismatch (record
// edited)"), a prev_hash that does not match the record before ("record
// edited or replaced"), missing seqs ("gap 41..43 (records deleted)"), and
// a last record short of the head ("head mismatch (records deleted at the
// end)"). The head (last seq and hash) is kept in audit_meta, updated in
// the same transaction as the records, and in the side file PATH.head
// ("%020d %64s\n"), rewritten after each commit. If Open finds the side file
// ahead of the database, it continues the chain after the side file's head
// (so the deleted range stays visible as a gap) and writes an
// EventIntegrity record. Starting over therefore means deleting PATH.head
// along with the database.
//
// Retention (Options.MaxAge, Options.MaxSize; at Open, every minute and on
// Prune) deletes only a prefix of the chain: the oldest records, never one
// behind a newer one kept. In the same transaction it stores the anchor
// (seq and hash of the last deleted record) in audit_meta and appends an
// EventRetention record saying how many it deleted, so Verify still passes.
// The JSONL mirror is append-only and never pruned; rotating it is left to
// the operator.
//
// # Limits of the chain
//
// The chain has no key. It shows edits and deletions made by someone who
// changes rows without recomputing the chain, and truncation unless both
// audit_meta and PATH.head are rewritten too. Someone who can write the
// database and the side file can rewrite history consistently; keeping the
// JSONL mirror or copies of PATH.head on other storage narrows that, a
// signing key or remote log would close it. A forged anchor hides pruned
// history the same way.
package audit
