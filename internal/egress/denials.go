package egress

import (
	"fmt"
	"net"
	"strconv"
)

// DenialPrinter returns a Log callback that hands each denial, as one
// line ("egress denied: HOST:PORT: REASON"), to print. The proxy calls Log
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
		target := ev.Host
		if ev.Port != 0 {
			target = net.JoinHostPort(ev.Host, strconv.Itoa(ev.Port))
		}
		select {
		case lines <- fmt.Sprintf("egress denied: %s: %s", target, ev.Reason):
		default:
		}
	}
}
