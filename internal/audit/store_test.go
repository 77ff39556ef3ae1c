package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openTest opens a store in a fresh directory; Close runs at cleanup.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "audit.db")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// callRecord is a typical tool-call record; i varies the tool and time.
func callRecord(i int) Record {
	return Record{
		Time:     time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC),
		Event:    EventCall,
		Client:   "claude",
		Session:  fmt.Sprintf("s%d", i%3),
		Sandbox:  "sb1",
		Server:   "fs",
		Tool:     fmt.Sprintf("tool%d", i),
		Category: "read",
		ArgShape: json.RawMessage(`{"path":{"string":12}}`),
		Decision: "allow",
		Rule:     "default",
		Duration: 1500 * time.Microsecond,
		Outcome:  "ok",
		Files:    []File{{Path: "/w/a.txt", Size: 3, SHA256: strings.Repeat("ab", 32)}},
		Domains:  []Domain{{Host: "example.com", Port: 443, Decision: "allow", BytesUp: 10, BytesDown: 20}},
		Detail:   map[string]string{"k": "v"},
	}
}

func flush(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Flush(testCtx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

var ignoreChain = cmpopts.IgnoreFields(Record{}, "Seq", "PrevHash", "Hash")

func TestAddQuery(t *testing.T) {
	s := openTest(t, Options{})
	var want []Record
	for i := range 10 {
		s.Add(callRecord(i))
		want = append(want, callRecord(i))
	}
	flush(t, s)
	got, err := s.Query(testCtx(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, ignoreChain); diff != "" {
		t.Fatalf("Query (-want +got):\n%s", diff)
	}
	for i, r := range got {
		if r.Seq != int64(i+1) {
			t.Errorf("record %d: seq %d", i, r.Seq)
		}
	}
	tests := []struct {
		f    Filter
		want []int64
	}{
		{Filter{Tool: "tool3"}, []int64{4}},
		{Filter{Session: "s1"}, []int64{2, 5, 8}},
		{Filter{Session: "s1", Limit: 2}, []int64{2, 5}},
		{Filter{AfterSeq: 8}, []int64{9, 10}},
		{Filter{Since: callRecord(7).Time}, []int64{8, 9, 10}},
		{Filter{Event: EventSessionStart}, nil},
		{Filter{Server: "fs", Decision: "allow", Client: "claude", Sandbox: "sb1", Tool: "tool0"}, []int64{1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.f), func(t *testing.T) {
			seqs := querySeqs(t, s, tt.f)
			if diff := cmp.Diff(tt.want, seqs); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHashDefinition recomputes each hash from the documented definition.
func TestHashDefinition(t *testing.T) {
	s := openTest(t, Options{})
	for i := range 5 {
		s.Add(callRecord(i))
	}
	flush(t, s)
	got, err := s.Query(testCtx(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for _, r := range got {
		if r.PrevHash != prev {
			t.Errorf("seq %d: prev_hash %q, want %q", r.Seq, r.PrevHash, prev)
		}
		h := r.Hash
		r.Hash = ""
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(append([]byte(r.PrevHash), body...))
		if hex.EncodeToString(sum[:]) != h {
			t.Errorf("seq %d: hash %s is not sha256(prev + %s)", r.Seq, h, body)
		}
		if strings.Contains(string(body), `"hash"`) || !strings.Contains(string(body), `"duration_ms":1.5`) {
			t.Errorf("seq %d: canonical body %s", r.Seq, body)
		}
		prev = h
	}
}

func TestCloseFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	s, err := Open(Options{Path: path, QueueSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	for i := range n {
		s.Add(callRecord(i))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	r, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Query(testCtx(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || got[n-1].Seq != n || got[n-1].Tool != fmt.Sprintf("tool%d", n-1) {
		t.Fatalf("after Close: %d records, want %d in order", len(got), n)
	}
	rep, err := r.Verify(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Records != n || rep.First != 1 || rep.Last != n {
		t.Fatalf("Verify: %+v", rep)
	}
}

func TestAfterClose(t *testing.T) {
	s := openTest(t, Options{})
	s.Add(callRecord(1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Add(callRecord(2))
	if got := s.Stats(); got.Dropped != 1 || got.Committed != 1 {
		t.Errorf("Stats after Add after Close: %+v", got)
	}
	if err := s.Flush(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Options{}); !errors.Is(err, ErrNoPath) {
		t.Errorf("Open without path: %v", err)
	}
	if _, err := Open(Options{Path: filepath.Join(t.TempDir(), "a.db"), MaxAge: -1}); err == nil {
		t.Error("Open with negative MaxAge: no error")
	}
	if _, err := OpenReader(filepath.Join(t.TempDir(), "missing.db")); err == nil {
		t.Error("OpenReader of a missing file: no error")
	}
}

func TestConcurrentAdd(t *testing.T) {
	s := openTest(t, Options{QueueSize: 4})
	const workers, per = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				r := callRecord(i)
				r.Client = fmt.Sprintf("c%d", w)
				s.Add(r)
			}
		})
	}
	wg.Wait()
	flush(t, s)
	for w := range workers {
		got, err := s.Query(testCtx(t), Filter{Client: fmt.Sprintf("c%d", w)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != per {
			t.Errorf("client c%d: %d records, want %d", w, len(got), per)
		}
		for i, r := range got { // one goroutine's records keep their order
			if r.Tool != fmt.Sprintf("tool%d", i) {
				t.Fatalf("client c%d record %d: tool %s", w, i, r.Tool)
			}
		}
	}
	st := s.Stats()
	if st.Added != workers*per || st.Committed != workers*per {
		t.Errorf("Stats: %+v", st)
	}
	t.Logf("Adds that waited: %d of %d", st.Waited, st.Added)
	rep, err := s.Verify(testCtx(t))
	if err != nil || !rep.OK() {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

func TestFollow(t *testing.T) {
	s := openTest(t, Options{})
	s.Add(callRecord(0))
	flush(t, s)
	r, err := OpenReader(s.opts.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := make(chan Record, 100)
	done := make(chan error, 1)
	go func() {
		done <- r.Follow(ctx, Filter{Server: "fs"}, func(rec Record) error {
			seen <- rec
			return nil
		})
	}()
	next := func() Record {
		select {
		case rec := <-seen:
			return rec
		case <-ctx.Done():
			t.Fatal("Follow: no record within the deadline")
			return Record{}
		}
	}
	if rec := next(); rec.Seq != 1 {
		t.Fatalf("Follow first: seq %d, want 1", rec.Seq)
	}
	other := callRecord(1)
	other.Server = "git"
	s.Add(other) // filtered out
	s.Add(callRecord(2))
	if rec := next(); rec.Seq != 3 || rec.Tool != "tool2" {
		t.Fatalf("Follow after start: %+v, want seq 3 tool2", rec)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow returned %v, want context.Canceled", err)
	}
}

func TestRecordJSON(t *testing.T) {
	r := callRecord(1)
	r.Duration = 2*time.Second + 345678*time.Nanosecond
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"duration_ms":2000.345678`, `"arg_shape":`, `"bytes_down":20`, `"prev_hash":""`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if err := json.Unmarshal([]byte(`{"duration_ms":"x"}`), &back); err == nil {
		t.Error("bad duration_ms: no error")
	}
}

func TestAddCopies(t *testing.T) {
	s := openTest(t, Options{QueueSize: 16})
	r := callRecord(1)
	s.Add(r)
	r.Files[0].Path = "/changed"
	r.Detail["k"] = "changed"
	r.ArgShape[2] = 'X'
	flush(t, s)
	got, err := s.Query(testCtx(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Record{callRecord(1)}, got, ignoreChain); diff != "" {
		t.Errorf("caller's later changes leaked in (-want +got):\n%s", diff)
	}
}

// TestToolFilter: `logs --tool` (Filter.SetTool) selects the same records
// by the client-visible name, the server's own name and SERVER/TOOL, and
// no record of another tool, in the query itself (so Limit and Follow's
// paging count only matching records).
func TestToolFilter(t *testing.T) {
	s := openTest(t, Options{})
	for _, r := range []Record{
		{Event: EventCall, Server: "github", Tool: "create_issue", Name: "github__create_issue"},
		{Event: EventCall, Server: "github", Tool: "list_issues", Name: "github__list_issues"},
		{Event: EventCall, Server: "fs", Tool: "create_issue", Name: "f_create_issue"},
		{Event: EventSessionStart},
		{Event: EventCall, Server: "fs", Tool: "other", Name: "f_other"},
	} {
		r.Time = time.Now()
		s.Add(r)
	}
	flush(t, s)
	tests := []struct {
		arg   string
		limit int
		want  []int64
	}{
		{"github__create_issue", 0, []int64{1}},
		{"f_create_issue", 0, []int64{3}},
		{"create_issue", 0, []int64{1, 3}}, // the servers' own name: both
		{"create_issue", 1, []int64{1}},
		{"github/create_issue", 0, []int64{1}},
		{"", 0, []int64{1, 2, 3, 4, 5}},
		{"nothing", 0, nil},
	}
	for _, tt := range tests {
		f := Filter{Limit: tt.limit}
		f.SetTool(tt.arg)
		seqs := querySeqs(t, s, f)
		if diff := cmp.Diff(tt.want, seqs); diff != "" {
			t.Errorf("--tool %q limit %d (-want +got):\n%s", tt.arg, tt.limit, diff)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"1h", now.Add(-time.Hour), false},
		{"2026-12-01T08:30:00Z", time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC), false},
		{"yesterday", time.Time{}, true},
	} {
		got, err := ParseSince(tt.in, now)
		if (err != nil) != tt.err || !got.Equal(tt.want) {
			t.Errorf("ParseSince(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// querySeqs runs f on s and returns the records' sequence numbers.
func querySeqs(t *testing.T, s *Store, f Filter) []int64 {
	t.Helper()
	got, err := s.Query(testCtx(t), f)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range got {
		seqs = append(seqs, r.Seq)
	}
	return seqs
}

// TestCommitWakesFollow: a commit closes the channel a waiting Store.Follow
// holds, so that a follower in this process (the metrics, the dashboard)
// sees the record at once, not at its next poll.
func TestCommitWakesFollow(t *testing.T) {
	s := openTest(t, Options{})
	woken := s.committedSignal()
	select {
	case <-woken:
		t.Fatal("signalled before any commit")
	default:
	}
	s.Add(callRecord(0))
	flush(t, s)
	select {
	case <-woken:
	default:
		t.Fatal("a commit did not wake the followers")
	}
	if next := s.committedSignal(); next == woken {
		t.Fatal("the next wait reuses the closed channel")
	}
}

// TestJSONLNotThroughLink: a symlink at the JSONL copy's name (one a
// project ships beside its config) is refused, naming the link and what
// it points to, and nothing is appended to its target.
func TestJSONLNotThroughLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "bashrc")
	if err := os.WriteFile(target, []byte("# the user's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "audit.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Path: filepath.Join(dir, "audit.db"), JSONL: link, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		s.Close()
		t.Fatal("Open wrote the JSONL copy through a symlink")
	}
	if !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Open: %v; want a refusal naming the link and its target", err)
	}
	if data, _ := os.ReadFile(target); string(data) != "# the user's\n" {
		t.Errorf("the link's target now holds %q", data)
	}
}

// TestJSONLOnlyRecords: a JSONL copy named after a file that holds
// something else (a shell's rc file) is refused, and nothing is appended;
// one of earlier records, or an empty one, is appended to.
func TestJSONLOnlyRecords(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "bashrc.jsonl")
	if err := os.WriteFile(rc, []byte("# the user's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Path: filepath.Join(dir, "audit.db"), JSONL: rc, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		s.Close()
		t.Fatal("Open appends records to a file that holds something else")
	}
	if !strings.Contains(err.Error(), "holds something other than audit records") {
		t.Errorf("Open: %v", err)
	}
	if data, _ := os.ReadFile(rc); string(data) != "# the user's\n" {
		t.Errorf("the file now holds %q", data)
	}
	for _, seed := range []string{"", `{"id":1}` + "\n"} {
		jsonl := filepath.Join(dir, "audit.jsonl")
		if err := os.WriteFile(jsonl, []byte(seed), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Options{Path: filepath.Join(dir, "audit.db"), JSONL: jsonl, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("a JSONL copy holding %q: %v", seed, err)
		}
		s.Close()
	}
}

// TestJSONLNotAFIFO: a FIFO at the JSONL copy's name (a project could
// ship one) neither stops Open, waiting for a reader, nor is written to.
func TestJSONLNotAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "audit.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := Open(Options{Path: filepath.Join(dir, "audit.db"), JSONL: fifo, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Open with a FIFO as the JSONL copy: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open waits on the FIFO") // the goroutine stays: the test binary ends
	}
}
