package cli

// What serve says when it starts: the config's warnings and one summary
// line, rather than a line per pinned definition (those go to the audit
// and to --log-level debug).

import (
	"fmt"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/integrity"
)

// startupSummary prints the config's warnings, one line each, then one
// line naming the servers and what the lock file at lockPath pins of
// each.
func (e *env) startupSummary(c *config.Config, lockPath string) {
	warns := config.Warnings(c)
	for _, w := range warns {
		e.errorf("%s:%d:%d: warning: %s", w.File, w.Line, w.Col, w.Msg)
	}
	// An unreadable lock file stops the guard before this; here it only
	// means "nothing pinned yet".
	lock, _ := integrity.ReadLock(lockPath)
	e.errorf("%s", summaryLine(c, lock, len(warns)))
}

// summaryLine is e.g. "mcpbox.yaml: 2 servers: github (12 tools pinned),
// docs (tools not yet pinned); 1 warning above".
func summaryLine(c *config.Config, lock *integrity.Lock, warnings int) string {
	parts := make([]string, 0, len(c.Servers))
	for _, s := range c.Servers {
		parts = append(parts, fmt.Sprintf("%s (%s)", s.Name, pinState(s, lock)))
	}
	w := "no warnings"
	switch {
	case warnings == 1:
		w = "1 warning above"
	case warnings > 1:
		w = fmt.Sprintf("%d warnings above", warnings)
	}
	return fmt.Sprintf("%s: %s: %s; %s", c.File, summaryCount(len(c.Servers), "server"), strings.Join(parts, ", "), w)
}

// pinState says how many of server s's tools the lock pins.
func pinState(s *config.Server, lock *integrity.Lock) string {
	if s.Pin == config.PinOff {
		return "pinning off"
	}
	if lock == nil || lock.Servers[s.Name] == nil || lock.Servers[s.Name].Tools == nil {
		return "tools not yet pinned"
	}
	return summaryCount(len(lock.Servers[s.Name].Tools), "tool") + " pinned"
}

func summaryCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
