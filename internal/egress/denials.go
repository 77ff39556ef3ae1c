package egress

import (
	"fmt"
	"net"
	"strconv"
)

// DenialPrinter returns a Log callback that hands each denial, as one
// line ("egress denied: HOST:PORT: REASON", or "egress denied: REASON"
// for a connection refused before it named a target), to print. The proxy calls Log
// on its own goroutines, some on the accept path, so the callback never
// blocks: print runs on a goroutine of its own, and lines are dropped
// when it does not keep up (a sandbox may flood the proxy on purpose).
func DenialPrinter(print func(line string)) func(Event) {
	lines := make(chan string, 64)
	go func() {
		for l := range lines {
			print(l)
		}
	}()
	return func(ev Event) {
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
		case lines <- line:
		default:
		}
	}
}
