package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fillDisk writes a file in dir until the file system is full and
// returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := 0; i < 1<<12; i++ {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return p
			}
			t.Fatalf("filling %s: %v", dir, err)
		}
	}
	t.Fatalf("filling %s: never full", dir)
	return ""
}

// bigRecord is a call record whose Detail needs new pages (and WAL
// frames) of the database: 16 KiB of text.
func bigRecord(tool string) Record {
	r := callRecord(0)
	r.Tool = tool
	r.Detail = map[string]string{"pad": strings.Repeat(tool+" ", 16<<10/(len(tool)+1))}
	return r
}

// waitFor polls cond for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waiting for %s: gave up after %v", what, limit)
		}
	}
}

// TestDiskFullFailsClosed fills the store's file system: the ticket of a
// record that cannot be committed fails (so the guard withholds the
// call's result), the store turns failing and fails later tickets at
// once, and once space is freed it recovers by itself, commits the
// records it kept (marked late) and the chain verifies.
func TestDiskFullFailsClosed(t *testing.T) {
	dir := smallTmpfs(t, "1m")
	s := openTest(t, Options{Path: filepath.Join(dir, "audit.db")})
	ctx := testCtx(t)
	if err := s.Submit(bigRecord("before")).Wait(ctx); err != nil {
		t.Fatalf("commit before the disk is full: %v", err)
	}
	filler := fillDisk(t, dir)

	committed := map[string]bool{"before": true}
	var failed []string
	for i := range 100 {
		tool := fmt.Sprintf("full%d", i)
		err := s.Submit(bigRecord(tool)).Wait(ctx)
		if err == nil {
			committed[tool] = true
			continue
		}
		if !errors.Is(err, ErrFailing) || !strings.Contains(err.Error(), s.opts.Path) {
			t.Fatalf("ticket error %q: want ErrFailing naming %s", err, s.opts.Path)
		}
		failed = append(failed, tool)
		break
	}
	if len(failed) == 0 {
		t.Fatal("100 records of 16 KiB committed on a full 1 MiB tmpfs")
	}
	if err := s.Err(); !errors.Is(err, ErrFailing) {
		t.Fatalf("Err after a failed commit = %v, want ErrFailing", err)
	}
	// While failing, a ticket fails at once: a short deadline must not be
	// what ends the wait.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.Submit(bigRecord("while")).Wait(short); !errors.Is(err, ErrFailing) {
		t.Fatalf("ticket while failing = %v, want ErrFailing at once", err)
	}
	failed = append(failed, "while")
	if err := s.Flush(ctx); !errors.Is(err, ErrFailing) {
		t.Fatalf("Flush while failing = %v, want ErrFailing", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the store to recover", func() bool { return s.Err() == nil })
	if err := s.Submit(bigRecord("after")).Wait(ctx); err != nil {
		t.Fatalf("commit after space is freed: %v", err)
	}
	committed["after"] = true

	recs, err := s.Query(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Record{}
	integrity := 0
	for _, r := range recs {
		got[r.Tool] = r
		if r.Event == EventIntegrity && strings.Contains(r.Error, "could not write") {
			integrity++
		}
	}
	for tool := range committed {
		if _, ok := got[tool]; !ok {
			t.Errorf("record %s was acknowledged but is not in the store", tool)
		}
	}
	for _, tool := range failed {
		r, ok := got[tool]
		if !ok {
			t.Errorf("record %s whose ticket failed was not committed late", tool)
		} else if r.Detail["audit_late"] == "" {
			t.Errorf("record %s committed late without the audit_late mark: %v", tool, r.Detail)
		}
	}
	if integrity != 1 {
		t.Errorf("%d integrity records about the failure, want 1", integrity)
	}
	if st := s.Stats(); st.Late < int64(len(failed)) || st.Lost != 0 {
		t.Errorf("stats %+v: want Late >= %d and Lost 0", st, len(failed))
	}
	rep, err := s.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("Verify after recovery: %v %v", err, rep.Problems)
	}
}

// TestDeletedWhileOpenFailsClosed deletes the database while the store
// has it open: SQLite would write on into the unlinked file, so the
// store must notice and refuse, naming the file.
func TestDeletedWhileOpenFailsClosed(t *testing.T) {
	s := openTest(t, Options{})
	ctx := testCtx(t)
	if err := s.Submit(callRecord(1)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.opts.Path); err != nil {
		t.Fatal(err)
	}
	// Noticed while idle, before any record asks.
	waitFor(t, 10*checkEvery, "the store to notice the deletion", func() bool { return errors.Is(s.Err(), ErrFileGone) })
	err := s.Submit(callRecord(2)).Wait(ctx)
	if !errors.Is(err, ErrFailing) || !errors.Is(err, ErrFileGone) || !strings.Contains(err.Error(), s.opts.Path) {
		t.Fatalf("ticket after the file was deleted = %v, want ErrFailing and ErrFileGone naming %s", err, s.opts.Path)
	}
	if err := s.Err(); !errors.Is(err, ErrFileGone) {
		t.Fatalf("Err = %v, want ErrFileGone", err)
	}
	// A new file at the path is not the store's file either.
	if err := os.WriteFile(s.opts.Path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few retries
	if err := s.Submit(callRecord(3)).Wait(ctx); !errors.Is(err, ErrFileGone) {
		t.Fatalf("ticket after the file was replaced = %v, want ErrFileGone", err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("Close = %v, want the records counted lost", err)
	}
}

// lockDB holds a write transaction on path from another connection, as
// another process would, until the returned func is called.
func lockDB(t *testing.T, path string) func() {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatalf("locking %s: %v", path, err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS locker (x)"); err != nil {
		t.Fatalf("locking %s: %v", path, err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// TestLockedFailsClosed: a database locked by another process past the
// busy timeout makes Open refuse, naming the file; while the store is
// open, it fails its tickets and recovers once the lock is gone.
func TestLockedFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	s, err := Open(Options{Path: path, BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := s.Submit(callRecord(1)).Wait(ctx); err != nil {
		t.Fatal(err)
	}

	release := lockDB(t, path)
	err = s.Submit(callRecord(2)).Wait(ctx)
	if !errors.Is(err, ErrFailing) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("ticket while another process holds the lock = %v, want ErrFailing naming %s, locked", err, path)
	}
	release()
	waitFor(t, 15*time.Second, "the store to recover", func() bool { return s.Err() == nil })
	if err := s.Submit(callRecord(3)).Wait(ctx); err != nil {
		t.Fatalf("commit after the lock is gone: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	lockDB(t, path)
	s, err = Open(Options{Path: path, BusyTimeout: 200 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded while another process holds the write lock")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("Open error %q does not name %s and the lock", err, path)
	}
}

// TestOpenCorrupt: a file that is not a SQLite database makes Open
// refuse, naming the file; the file is left as it was.
func TestOpenCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	garbage := []byte(strings.Repeat("this is not a database\n", 400))
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Path: path})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a file that is not a database")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a database") {
		t.Fatalf("Open error %q does not name %s as not a database", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != string(garbage) {
		t.Fatal("Open changed the corrupt file")
	}
}

// TestRetryWait: a failing store's retries back off to retryMax and stay
// there, however long it fails (the shift once overflowed at attempt 38
// into a wait of zero, and the loop spun).
func TestRetryWait(t *testing.T) {
	prev := time.Duration(0)
	for attempt := 1; attempt <= 200; attempt++ {
		w := retryWait(attempt)
		if w <= 0 || w > retryMax || w < prev {
			t.Fatalf("retryWait(%d) = %v after %v; want it in (0, %v] and not shorter than before", attempt, w, prev, retryMax)
		}
		prev = w
	}
	if prev != retryMax {
		t.Errorf("retryWait settles at %v, want %v", prev, retryMax)
	}
}
