package config

import (
	"fmt"
	"strings"
)

// Warnings lists what a valid config allows but a reviewer should see:
// secret-looking values in plain env, one secret shared by several
// servers, and secrets beside broad egress. They carry FILE:LINE:COL like
// errors; `mcpbox policy check` prints them and still succeeds.
func Warnings(c *Config) Errors {
	r := &collector{file: c.File}
	users := map[string][]string{} // secret reference -> servers
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		warnPlainEnv(r, s)
		for _, sec := range s.Secrets {
			users[sec.From] = append(users[sec.From], s.Name)
			if len(users[sec.From]) == 2 {
				r.errorf(sec.Meta.Pos, "servers.%s.secrets.%s: %s is also given to server %s; give each server its own credential",
					s.Name, sec.Name, sec.From, users[sec.From][0])
			}
		}
		warnSecretsWithBroadEgress(r, s)
	}
	if err := r.err(); err != nil {
		return err.(Errors)
	}
	return nil
}

// secretWords mark env names that usually hold credentials.
var secretWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "ACCESS_KEY", "CREDENTIAL"}

func warnPlainEnv(r *collector, s *Server) {
	for _, e := range s.Env {
		upper := strings.ToUpper(e.Name)
		for _, w := range secretWords {
			if strings.Contains(upper, w) && e.Value != "" {
				r.errorf(e.Pos, "servers.%s.env.%s: looks like a credential in plain config; use secrets: {%s: {from: env:VAR | file:PATH | cmd:COMMAND}}",
					s.Name, e.Name, e.Name)
				break
			}
		}
	}
}

func warnSecretsWithBroadEgress(r *collector, s *Server) {
	if len(s.Secrets) == 0 {
		return
	}
	for i := range s.Network.Egress {
		e := &s.Network.Egress[i]
		broad := e.Host == "*" || e.Host == "" && e.CIDR != ""
		if !broad && strings.HasPrefix(e.Host, "*.") && strings.Count(e.Host, ".") < 2 {
			broad = true // "*.com": a whole top-level domain
		}
		if broad {
			r.errorf(e.Meta.Pos, "servers.%s.network.egress[%d]: %s; the server holds secrets it could send there",
				s.Name, i, describeBroad(e))
		}
	}
}

func describeBroad(e *Egress) string {
	switch {
	case e.Host == "*":
		return "allows any host"
	case e.Host == "":
		return fmt.Sprintf("allows every address in %s", e.CIDR)
	default:
		return fmt.Sprintf("allows every name below %s", strings.TrimPrefix(e.Host, "*."))
	}
}
