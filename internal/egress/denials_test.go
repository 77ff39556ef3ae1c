package egress

import (
	"testing"
	"time"
)

// TestDenialPrinter: denials become one line each, allowed connections
// none, and a print that does not keep up never blocks the proxy.
func TestDenialPrinter(t *testing.T) {
	got := make(chan string, 8)
	log := DenialPrinter(func(l string) { got <- l })
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
	slow := DenialPrinter(func(string) { <-stuck })
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
}
