package audit

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// filledStore returns a store holding n flushed call records.
func filledStore(t *testing.T, n int, opts Options) *Store {
	t.Helper()
	s := openTest(t, opts)
	for i := range n {
		s.Add(callRecord(i))
	}
	flush(t, s)
	return s
}

// tamper runs raw SQL on the database through a connection of its own,
// as someone with write access to the file would.
func tamper(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, "_busy_timeout=5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatalf("tampering: %v", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("tampering %q changed nothing", query)
	}
}

func verifyProblems(t *testing.T, s *Store) []string {
	t.Helper()
	rep, err := s.Verify(testCtx(t))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep.Problems
}

// wantProblem fails unless exactly one problem is reported and it contains
// every fragment.
func wantProblem(t *testing.T, problems []string, fragments ...string) {
	t.Helper()
	if len(problems) != 1 {
		t.Fatalf("problems %q, want exactly one with %q", problems, fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(problems[0], f) {
			t.Errorf("problem %q lacks %q", problems[0], f)
		}
	}
}

func TestVerifyClean(t *testing.T) {
	s := filledStore(t, 20, Options{})
	rep, err := s.Verify(testCtx(t))
	if err != nil || !rep.OK() || rep.Records != 20 || rep.First != 1 || rep.Last != 20 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	// The head hash, which docs/config.md says to copy elsewhere as an
	// anchor, is the head file's.
	head, err := os.ReadFile(headPath(s.opts.Path))
	if err != nil {
		t.Fatal(err)
	}
	if want := "00000000000000000020 " + rep.Head; rep.Head == "" || strings.TrimSpace(string(head)) != want {
		t.Fatalf("Verify's head %q, the head file holds %q", rep.Head, head)
	}
	empty := openTest(t, Options{})
	if p := verifyProblems(t, empty); len(p) != 0 {
		t.Fatalf("empty store: %q", p)
	}
}

func TestVerifyEditedColumn(t *testing.T) {
	s := filledStore(t, 10, Options{})
	tamper(t, s.opts.Path, `UPDATE audit_records SET tool = 'innocent' WHERE seq = 5`)
	wantProblem(t, verifyProblems(t, s), "seq 5:", "record edited")
}

func TestVerifyEditedBody(t *testing.T) {
	s := filledStore(t, 10, Options{})
	tamper(t, s.opts.Path, `UPDATE audit_records SET tool = 'innocent',
		body = replace(body, '"tool":"tool4"', '"tool":"innocent"') WHERE seq = 5`)
	wantProblem(t, verifyProblems(t, s), "seq 5:", "hash mismatch (record edited)")
}

func TestVerifyRechainedRecord(t *testing.T) {
	// An edit that also fixes the record's own hash breaks the link to
	// the next record.
	s := filledStore(t, 10, Options{})
	recs, err := s.Query(testCtx(t), Filter{AfterSeq: 4, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	r.Tool, r.Hash = "innocent", ""
	body := chainRecord(&r, link{4, r.PrevHash})
	tamper(t, s.opts.Path, `UPDATE audit_records SET tool = ?, body = ?, hash = ? WHERE seq = 5`, r.Tool, body, r.Hash)
	wantProblem(t, verifyProblems(t, s), "seq 6:", "record 5 edited or replaced")
}

func TestVerifyDeletedMiddle(t *testing.T) {
	s := filledStore(t, 10, Options{})
	tamper(t, s.opts.Path, `DELETE FROM audit_records WHERE seq IN (4, 5, 6)`)
	wantProblem(t, verifyProblems(t, s), "gap 4..6 (records deleted)")
}

func TestVerifyDeletedFirst(t *testing.T) {
	s := filledStore(t, 10, Options{})
	tamper(t, s.opts.Path, `DELETE FROM audit_records WHERE seq <= 2`)
	wantProblem(t, verifyProblems(t, s), "gap 1..2 (records deleted)")
}

func TestVerifyDeletedEnd(t *testing.T) {
	s := filledStore(t, 10, Options{})
	tamper(t, s.opts.Path, `DELETE FROM audit_records WHERE seq >= 8`)
	p := verifyProblems(t, s)
	if len(p) != 2 {
		t.Fatalf("problems %q, want meta and file head mismatches", p)
	}
	for _, what := range []string{"meta head", "head file"} {
		if !strings.Contains(strings.Join(p, "\n"), "seq 8: head mismatch (records deleted at the end): "+what+" is seq 10") {
			t.Errorf("problems %q lack the %s mismatch", p, what)
		}
	}
}

func TestVerifyDeletedEndAndMeta(t *testing.T) {
	// Rewriting audit_meta too still leaves the side file.
	s := filledStore(t, 10, Options{})
	tamper(t, s.opts.Path, `DELETE FROM audit_records WHERE seq >= 8`)
	var hash string
	db := s.DB()
	if err := db.QueryRow(`SELECT hash FROM audit_records WHERE seq = 7`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	tamper(t, s.opts.Path, `UPDATE audit_meta SET value = CASE key WHEN 'head_seq' THEN '7' ELSE ? END
		WHERE key IN ('head_seq', 'head_hash')`, hash)
	wantProblem(t, verifyProblems(t, s), "head mismatch (records deleted at the end): head file is seq 10")
}

func TestVerifyHeadFileMissing(t *testing.T) {
	s := filledStore(t, 3, Options{})
	if err := os.Remove(headPath(s.opts.Path)); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, verifyProblems(t, s), "head file missing")
}

// TestReopenAfterTruncation: records cut from the end while the store is
// closed stay visible after it reopens and writes on.
func TestReopenAfterTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	s := filledStore(t, 10, Options{Path: path})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tamper(t, path, `DELETE FROM audit_records WHERE seq >= 9`)
	tamper(t, path, `UPDATE audit_meta SET value = '8' WHERE key = 'head_seq'`)
	s2 := openTest(t, Options{Path: path})
	s2.Add(callRecord(99))
	flush(t, s2)
	got, err := s2.Query(testCtx(t), Filter{AfterSeq: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 11 || got[0].Event != EventIntegrity || got[1].Tool != "tool99" {
		t.Fatalf("after reopen: %+v", got)
	}
	if !strings.Contains(got[0].Error, "records deleted at the end") {
		t.Errorf("integrity record: %q", got[0].Error)
	}
	wantProblem(t, verifyProblems(t, s2), "gap 9..10 (records deleted)")
}

// TestReopenAfterCrashBetweenCommitAndHead: a side file one batch behind
// is what a crash leaves; it is not reported.
func TestReopenHeadFileBehind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	s := filledStore(t, 3, Options{Path: path})
	old, err := os.ReadFile(headPath(path))
	if err != nil {
		t.Fatal(err)
	}
	s.Add(callRecord(3))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(headPath(path), old, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, Options{Path: path})
	s2.Add(callRecord(4))
	flush(t, s2)
	if p := verifyProblems(t, s2); len(p) != 0 {
		t.Fatalf("problems %q", p)
	}
	if n, _ := s2.Query(testCtx(t), Filter{Event: EventIntegrity}); len(n) != 0 {
		t.Fatalf("integrity records %+v", n)
	}
}

func TestPruneByAge(t *testing.T) {
	s := openTest(t, Options{MaxAge: time.Hour})
	old := time.Now().Add(-2 * time.Hour)
	for i := range 5 {
		r := callRecord(i)
		r.Time = old
		s.Add(r)
	}
	for i := 5; i < 8; i++ {
		r := callRecord(i)
		r.Time = time.Now()
		s.Add(r)
	}
	if err := s.Prune(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Query(testCtx(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].Seq != 6 || got[3].Event != EventRetention {
		t.Fatalf("after prune: %d records, first seq %d", len(got), got[0].Seq)
	}
	if d := got[3].Detail; d["pruned"] != "5" || d["through_seq"] != "5" || d["reason"] != "age" {
		t.Errorf("retention record detail %v", d)
	}
	rep, err := s.Verify(testCtx(t))
	if err != nil || !rep.OK() || rep.Anchor != 5 || rep.First != 6 {
		t.Fatalf("Verify after prune: %+v, %v", rep, err)
	}
	if err := s.Prune(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Query(testCtx(t), Filter{Event: EventRetention}); len(n) != 1 {
		t.Errorf("a prune with nothing due wrote a record: %d retention records", len(n))
	}
}

func TestPruneBySize(t *testing.T) {
	const limit = 256 << 10
	s := openTest(t, Options{MaxSize: limit})
	for i := range 2000 {
		r := callRecord(i)
		r.Error = strings.Repeat("e", 400)
		s.Add(r)
	}
	flush(t, s)
	before := usedSize(t, s)
	if before <= limit {
		t.Fatalf("test setup: %d bytes used, not over %d", before, limit)
	}
	if err := s.Prune(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if after := usedSize(t, s); after > limit {
		t.Errorf("after prune: %d bytes used, limit %d", after, limit)
	}
	rep, err := s.Verify(testCtx(t))
	if err != nil || !rep.OK() || rep.Anchor == 0 || rep.Records >= 2000 {
		t.Fatalf("Verify after prune: %+v, %v", rep, err)
	}
	if st := s.Stats(); st.Pruned != rep.Anchor {
		t.Errorf("Stats.Pruned %d, anchor %d", st.Pruned, rep.Anchor)
	}
}

func usedSize(t *testing.T, s *Store) int64 {
	t.Helper()
	tx, err := s.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	n, err := usedBytes(tx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestVerifyWhileWriting: a live writer must not make Verify report
// problems (the side file is read before the snapshot).
func TestVerifyWhileWriting(t *testing.T) {
	s := openTest(t, Options{QueueSize: 64})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				s.Add(callRecord(i))
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for range 30 {
		rep, err := s.Verify(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("Verify during writes at %d records: %q", rep.Records, rep.Problems)
		}
	}
}
