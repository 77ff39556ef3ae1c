package audit

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestTwoStoresOneChain: two gateways on one state dir each open a Store
// on the same file and write at the same time. Each chains its records to
// the head the database holds when it writes, not to the last one it
// wrote itself, so the records form one line: Verify passes, the seqs run
// 1..N without a gap, and the head side file ends at the last record.
func TestTwoStoresOneChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	a := openTest(t, Options{Path: path})
	b := openTest(t, Options{Path: path})
	const perWriter, rounds = 40, 5
	var wg sync.WaitGroup
	for w, s := range []*Store{a, b} {
		wg.Go(func() {
			for r := range rounds {
				for i := range perWriter {
					rec := callRecord(i)
					rec.Client = fmt.Sprintf("writer%d", w)
					rec.Detail = map[string]string{"round": fmt.Sprint(r)}
					s.Add(rec)
				}
				// A commit per round: the writers' batches interleave.
				if err := s.Flush(testCtx(t)); err != nil {
					t.Errorf("writer %d: Flush: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, s := range []*Store{a, b} {
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	rd, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rep, err := rd.Verify(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	const total = 2 * rounds * perWriter
	if !rep.OK() || rep.Records != total || rep.First != 1 || rep.Last != total {
		t.Fatalf("Verify: %+v; want %d records 1..%d and no problems", rep, total, total)
	}
	recs, err := rd.Query(testCtx(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	switches := 0
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
		seen[r.Client]++
		if i > 0 && recs[i-1].Client != r.Client {
			switches++
		}
	}
	if seen["writer0"] != rounds*perWriter || seen["writer1"] != rounds*perWriter {
		t.Errorf("records per writer: %v", seen)
	}
	if switches < 2 {
		t.Logf("the writers' batches did not interleave (%d switches); the chain was still checked", switches)
	}
	head, ok, err := readHead(headPath(path))
	if err != nil || !ok || head.Seq != total {
		t.Errorf("head file: %+v %v %v; want seq %d", head, ok, err, total)
	}
}
