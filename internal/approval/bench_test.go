package approval

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkAskRemembered is the hot path: a call allowed "always", looked
// up in SQLite.
func BenchmarkAskRemembered(b *testing.B) {
	br, _ := newBroker(b, openDB(b), wait)
	id, ch := holdOne(b, br, callReq())
	if err := br.Decide(id, Decision{Allow: true, Scope: ScopeAlways, By: "bench"}); err != nil {
		b.Fatal(err)
	}
	recv(b, ch)
	req := callReq()
	req.Session = ""
	for b.Loop() {
		if d, err := br.Ask(context.Background(), req, nil); err != nil || !d.Allow {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkAskDecide is a held call decided through Decide: two writes.
func BenchmarkAskDecide(b *testing.B) {
	br, _ := newBroker(b, openDB(b), wait)
	for b.Loop() {
		id, ch := holdOne(b, br, callReq())
		if err := br.Decide(id, Decision{Allow: true, By: "bench"}); err != nil {
			b.Fatal(err)
		}
		recv(b, ch)
	}
}

func BenchmarkSummary(b *testing.B) {
	args := json.RawMessage(`{"repo":"octo/x","title":"` + strings.Repeat("t", 80) + `","body":"` + strings.Repeat("b", 4000) + `","labels":["a","b","c"]}`)
	for b.Loop() {
		Summary(args, redactSecret)
	}
}
