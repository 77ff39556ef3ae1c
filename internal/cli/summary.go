package cli

// What serve says when it starts: the config's warnings and one summary
// line, rather than a line per pinned definition (those go to the audit
// and to --log-level debug).

import (
	"fmt"
	"strings"

	"mcpbox/internal/daemon"
)

// startupSummary prints the config's warnings, one line each, then one
// line naming the servers and what the lock file pins of each.
func (e *env) startupSummary(sum daemon.Summary) {
	for _, w := range sum.Warnings {
		e.errorf("%s:%d:%d: warning: %s", w.File, w.Line, w.Col, w.Msg)
	}
	e.errorf("%s", summaryLine(sum))
}

// summaryLine is e.g. "mcpbox.yaml: 2 servers: github (12 tools pinned),
// docs (tools not yet pinned); 1 warning above", or with a server that
// could not be set up "... docs (unavailable); no config warnings; why 1
// server could not be set up below".
func summaryLine(sum daemon.Summary) string {
	parts := make([]string, 0, len(sum.Servers))
	down := 0
	for _, s := range sum.Servers {
		state := pinState(s)
		if s.Unavailable {
			state, down = "unavailable", down+1
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", s.Name, state))
	}
	w := "no warnings"
	switch n := len(sum.Warnings); {
	case n == 1:
		w = "1 warning above"
	case n > 1:
		w = fmt.Sprintf("%d warnings above", n)
	}
	if down > 0 {
		// Their warnings follow this line: "no warnings" would deny them.
		w = strings.Replace(w, "warning", "config warning", 1) + "; why " + summaryCount(down, "server") + " could not be set up below"
	}
	return fmt.Sprintf("%s: %s: %s; %s", sum.File, summaryCount(len(sum.Servers), "server"), strings.Join(parts, ", "), w)
}

// pinState says how many of the server's tools the lock pins.
func pinState(s daemon.ServerPins) string {
	switch {
	case s.PinOff:
		return "pinning off"
	case !s.Pinned:
		return "tools not yet pinned"
	}
	return summaryCount(s.Tools, "tool") + " pinned"
}

func summaryCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
