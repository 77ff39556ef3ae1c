package egress

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// Denials turns the proxy's denials into one line each ("egress denied:
// HOST:PORT: REASON", or "egress denied: REASON" for a connection
// refused before it named a target) and hands them to a print function.
// The proxy calls Log on its own goroutines, some on the accept path, so
// Log never blocks: print runs on a goroutine of its own, and lines are
// dropped when it does not keep up (a sandbox may flood the proxy on
// purpose). Flush lets a command print the last lines before it exits.
type Denials struct {
	queue chan denialItem
}

// denialItem is a line to print, or a flush marker to close once every
// line queued before it has been printed.
type denialItem struct {
	line    string
	flushed chan struct{}
}

// NewDenials starts the goroutine that prints the lines.
func NewDenials(print func(line string)) *Denials {
	d := &Denials{queue: make(chan denialItem, 64)}
	go func() {
		for it := range d.queue {
			if it.flushed != nil {
				close(it.flushed)
				continue
			}
			print(it.line)
		}
	}()
	return d
}

// Log is the proxy's Log callback.
func (d *Denials) Log(ev Event) {
	if ev.Decision == "allow" {
		return
	}
	line := "egress denied: " + ev.Reason
	switch {
	case ev.Port != 0:
		line = fmt.Sprintf("egress denied: %s: %s", net.JoinHostPort(ev.Host, strconv.Itoa(ev.Port)), ev.Reason)
	case ev.Host != "":
		line = fmt.Sprintf("egress denied: %s: %s", ev.Host, ev.Reason)
	}
	// A connection refused as it is accepted (the connection limit)
	// has no target yet: its line is the reason alone, not ": REASON".
	select {
	case d.queue <- denialItem{line: line}:
	default:
	}
}

// Flush waits, at most wait, until every line logged before it has been
// printed. Call it after the proxy has closed (its Close waits for its Log
// calls), so that a command's exit does not cut off its last denials.
func (d *Denials) Flush(wait time.Duration) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	flushed := make(chan struct{})
	select {
	case d.queue <- denialItem{flushed: flushed}:
	case <-timer.C:
		return
	}
	select {
	case <-flushed:
	case <-timer.C:
	}
}
