package dashboard

import (
	"strings"
	"testing"
)

// TestEventsFanOut: every subscriber gets each event; one that does not
// read loses the overflow instead of blocking the publisher; a cancelled
// subscription gets nothing more.
func TestEventsFanOut(t *testing.T) {
	e := NewEvents()
	a, cancelA := e.Subscribe()
	slow, cancelSlow := e.Subscribe()
	defer cancelSlow()
	for i := range subBuffer + 10 { // the slow one's buffer overflows: Publish must not block
		e.Publish(Event{Type: "record", Seq: int64(i + 1)})
		if ev := <-a; ev.Seq != int64(i+1) {
			t.Fatalf("event %d: %+v", i+1, ev)
		}
	}
	if len(slow) != subBuffer {
		t.Errorf("slow subscriber holds %d, want its buffer (%d)", len(slow), subBuffer)
	}
	cancelA()
	cancelA() // idempotent
	e.Publish(Event{Type: "record", Seq: 999})
	if ev, ok := <-a; ok {
		t.Errorf("a cancelled subscription got %+v", ev)
	}
}

// TestLimitWriter: a diff past the limit is cut, with errTooBig.
func TestLimitWriter(t *testing.T) {
	var b strings.Builder
	w := &limitWriter{w: &b, n: 5}
	if _, err := w.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("defg")); err != errTooBig || b.String() != "abcde" {
		t.Errorf("past the limit: %v, kept %q", err, b.String())
	}
}
