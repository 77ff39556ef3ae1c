package cli

// What serve says when it starts: the config's warnings and one summary
// line, rather than a line per pinned definition (those go to the audit
// and to --log-level debug).

import "mcpbox/internal/daemon"

// startupSummary prints the config's warnings, one line each, then one
// line naming the servers and what the lock file pins of each.
func (e *env) startupSummary(sum daemon.Summary) {
	for _, w := range sum.Warnings {
		e.errorf("%s:%d:%d: warning: %s", w.File, w.Line, w.Col, w.Msg)
	}
	e.errorf("%s", sum.Line())
}
