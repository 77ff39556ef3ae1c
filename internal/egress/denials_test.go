package egress

import (
	"sync"
	"testing"
	"time"
)

// TestDenials: denials become one line each, allowed connections none,
// and a print that does not keep up never blocks the proxy.
func TestDenials(t *testing.T) {
	got := make(chan string, 8)
	log := NewDenials(func(l string) { got <- l }).Log
	log(Event{Decision: "allow", Host: "example.com", Port: 443})
	log(Event{Decision: "deny", Host: "169.254.169.254", Port: 80, Reason: "blocked address"})
	select {
	case l := <-got:
		if l != "egress denied: 169.254.169.254:80: blocked address" {
			t.Fatalf("line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no line for a denial")
	}
	// Refused at accept (the connection limit): no target to show.
	log(Event{Decision: "deny", Reason: "connection limit (4) reached"})
	select {
	case l := <-got:
		if l != "egress denied: connection limit (4) reached" {
			t.Fatalf("line %q for a denial without a target", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no line for a denial without a target")
	}
	select {
	case l := <-got:
		t.Fatalf("a second line %q (an allowed connection printed?)", l)
	case <-time.After(50 * time.Millisecond):
	}

	stuck := make(chan struct{})
	defer close(stuck)
	slowDenials := NewDenials(func(string) { <-stuck })
	slow := slowDenials.Log
	done := make(chan struct{})
	go func() {
		for range 1000 {
			slow(Event{Decision: "deny", Host: "x", Reason: "r"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the callback blocked behind a stuck printer")
	}
	// Flush is bounded too.
	flushed := make(chan struct{})
	go func() {
		slowDenials.Flush(100 * time.Millisecond)
		close(flushed)
	}()
	select {
	case <-flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("Flush blocked behind a stuck printer")
	}
}

// TestDenialsFlush: after Flush, every line logged before it has been
// printed, so a command that exits right after prints its last denials
// (the print is slow on purpose: before Flush, exec lost such lines).
func TestDenialsFlush(t *testing.T) {
	var mu sync.Mutex
	var printed []string
	d := NewDenials(func(l string) {
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		printed = append(printed, l)
		mu.Unlock()
	})
	for i := range 3 {
		d.Log(Event{Decision: "deny", Host: "h", Port: 80 + i, Reason: "not allowed"})
	}
	d.Flush(10 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(printed) != 3 || printed[2] != "egress denied: h:82: not allowed" {
		t.Fatalf("printed before Flush returned: %q", printed)
	}
}
