package daemon

// What serve says when it starts, as data: the config's warnings and what
// the lock file pins of each server (the CLI prints one line of it).

import (
	"context"
	"fmt"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/integrity"
	"mcpbox/internal/launch"
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
	sum := Summarize(c, lock)
	sum.Warnings = append(sum.Warnings, secretWarnings(c)...)
	return sum
}

// secretWarnings flags each env: and file: reference of a server's
// secrets and headers that cannot be read now (an unset variable, a
// missing file, a value too short): every start of that server would
// fail on it, and without this serve would say so only when a client
// connects, after a start-up line saying "no warnings". Only the cheap,
// side-effect-free kinds are read, the way a start reads them; cmd:
// references are not run here (they may prompt or take time), and
// kubernetes: ones are read from the cluster at each start. A warning
// names the reference, never a value.
func secretWarnings(c *config.Config) config.Errors {
	var ws config.Errors
	check := func(s *config.Server, pos config.Pos, what, ref string) {
		if ref == "" || !(strings.HasPrefix(ref, "env:") || strings.HasPrefix(ref, "file:")) {
			return
		}
		if _, err := launch.ResolveSecret(context.Background(), what, ref, false); err != nil {
			ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col,
				Msg: fmt.Sprintf("servers.%s.%s: %v: server %s cannot start until it can be read", s.Name, what, err, s.Name)})
		}
	}
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		for _, sec := range s.Secrets {
			what := "secrets." + sec.Name
			if in := sec.Inject; in != nil && in.AWS != nil {
				check(s, sec.Meta.Pos, what+".inject.aws.access_key_id", in.AWS.AccessKeyID)
				check(s, sec.Meta.Pos, what+".inject.aws.secret_access_key", in.AWS.SecretAccessKey)
				check(s, sec.Meta.Pos, what+".inject.aws.session_token", in.AWS.SessionToken)
				continue
			}
			check(s, sec.Meta.Pos, what, sec.From)
		}
		for _, h := range s.Headers {
			check(s, h.Meta.Pos, "headers."+h.Name, h.From)
		}
	}
	return ws
}
