package daemon

// What serve says when it starts, as data: the config's warnings and what
// the lock file pins of each server (the CLI prints one line of it).

import (
	"mcpbox/internal/config"
	"mcpbox/internal/integrity"
)

// Summary is the startup summary of a config.
type Summary struct {
	// File is the config's name as its warnings give it.
	File     string
	Warnings config.Errors // config.Warnings: what a reviewer should see
	// Servers are in the config's order.
	Servers []ServerPins
}

// ServerPins is what the lock file pins of one server.
type ServerPins struct {
	Name string
	// PinOff: the server's pin is off; nothing is pinned or checked.
	PinOff bool
	// Pinned: the lock has the server's tools, Tools of them.
	Pinned bool
	Tools  int
}

// Summarize is the summary of c against lock (nil: nothing pinned yet).
func Summarize(c *config.Config, lock *integrity.Lock) Summary {
	sum := Summary{File: c.File, Warnings: config.Warnings(c)}
	for _, s := range c.Servers {
		p := ServerPins{Name: s.Name, PinOff: s.Pin == config.PinOff}
		if sl := lockOf(lock, s.Name); sl != nil && sl.Tools != nil {
			p.Pinned, p.Tools = true, len(sl.Tools)
		}
		sum.Servers = append(sum.Servers, p)
	}
	return sum
}

func lockOf(lock *integrity.Lock, server string) *integrity.ServerLock {
	if lock == nil {
		return nil
	}
	return lock.Servers[server]
}

// summarize is the summary of c against the lock file at lockPath. An
// unreadable lock file stops the guard before this; here it only means
// "nothing pinned yet".
func summarize(c *config.Config, lockPath string) Summary {
	lock, _ := integrity.ReadLock(lockPath)
	return Summarize(c, lock)
}
