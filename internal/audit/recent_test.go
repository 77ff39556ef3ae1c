package audit

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestRecentAndHead(t *testing.T) {
	st, err := Open(Options{Path: filepath.Join(t.TempDir(), "audit.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h, err := st.Head(ctx); err != nil || h != 0 {
		t.Fatalf("head of an empty store %d %v", h, err)
	}
	for i, o := range []string{OutcomeOK, OutcomeDenied, OutcomeOK, OutcomeOK} {
		st.Add(Record{Event: EventCall, Server: "s", Tool: string(rune('a' + i)), Outcome: o})
	}
	st.Add(Record{Event: EventEgress, Server: "s"})
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	head, err := st.Head(ctx)
	if err != nil || head < 5 {
		t.Fatalf("head %d %v", head, err)
	}
	got, err := st.Recent(ctx, Filter{Event: EventCall}, OutcomeOK, 0, 2)
	if err != nil || len(got) != 2 || got[0].Tool != "d" || got[1].Tool != "c" {
		t.Fatalf("newest two ok calls: %+v %v", got, err)
	}
	older, err := st.Recent(ctx, Filter{Event: EventCall}, OutcomeOK, got[1].Seq, 10)
	if err != nil || len(older) != 1 || older[0].Tool != "a" {
		t.Fatalf("the page before: %+v %v", older, err)
	}
	if d, _ := st.Recent(ctx, Filter{}, OutcomeDenied, 0, 10); len(d) != 1 || d[0].Tool != "b" {
		t.Fatalf("denied: %+v", d)
	}
}
