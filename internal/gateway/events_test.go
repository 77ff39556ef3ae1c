package gateway

import (
	"sync"
	"testing"
)

// A request's notifications reach its handler in order, a burst past
// maxEvents or queueBytes is dropped rather than blocking the server's
// reader, and what ran stops counting.
func TestEventsBoundedAndOrdered(t *testing.T) {
	e := newEvents()
	var got []int
	for i := range maxEvents + 10 {
		ok := e.put(1, func() { got = append(got, i) })
		if want := i < maxEvents; ok != want {
			t.Fatalf("put %d: %v, want %v", i, ok, want)
		}
	}
	select {
	case <-e.signal():
	default:
		t.Fatal("no signal after a put")
	}
	e.run()
	if len(got) != maxEvents {
		t.Fatalf("ran %d, want %d", len(got), maxEvents)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("ran %v..., out of order at %d", got[:i+1], i)
		}
	}

	if !e.put(queueBytes, func() {}) {
		t.Fatal("a notification of queueBytes refused on an empty queue")
	}
	if e.put(1, func() {}) {
		t.Fatal("a notification past queueBytes accepted")
	}
	e.run()
	if !e.put(queueBytes, func() {}) {
		t.Fatal("bytes still counted after they ran")
	}

	var none *events
	if none.signal() != nil {
		t.Fatal("a nil queue signals")
	}
	none.run()
}

// run runs only what was queued when it began: a server that keeps
// sending must not keep the call from seeing its timeout.
func TestEventsRunIsBounded(t *testing.T) {
	e := newEvents()
	ran := 0
	var again func()
	again = func() {
		ran++
		if !e.put(1, again) {
			t.Error("put refused")
		}
	}
	e.put(1, again)
	<-e.signal()
	e.run()
	if ran != 1 {
		t.Fatalf("one run ran %d notifications, want the 1 queued when it began", ran)
	}
	select {
	case <-e.signal():
	default:
		t.Fatal("no signal for the notification queued during run")
	}
	e.run()
	if ran != 2 {
		t.Fatalf("ran %d, want 2", ran)
	}
	if n := len(e.queue) - e.head; n != 1 {
		t.Fatalf("%d waiting, want 1", n)
	}
}

// Concurrent puts are all run once, whatever the interleaving with run.
func TestEventsConcurrent(t *testing.T) {
	e := newEvents()
	const writers, each = 4, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				e.put(1, func() { mu.Lock(); ran++; mu.Unlock() })
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for loop := true; loop; {
		select {
		case <-e.signal():
			e.run()
		case <-done:
			e.run()
			loop = false
		}
	}
	if ran != writers*each {
		t.Fatalf("ran %d, want %d", ran, writers*each)
	}
}
