package track

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"mcpbox/internal/audit"
)

// secretUse is one substitution of a secret added at the egress proxy,
// or one refusal of a request that carried its placeholder.
type secretUse struct {
	at      time.Time
	name    string // "NAME@HOST:PORT"
	where   string // "HOST:PORT"
	refused bool
}

// DetailSecrets is the call record's Detail key naming the secrets the
// proxy added to the call's requests: "NAME@HOST:PORT", comma-separated.
// DetailSecretsRefused names those whose placeholder a request of the
// call carried where it was refused (an exfiltration attempt), alike.
const (
	DetailSecrets        = "secrets_injected"
	DetailSecretsRefused = "secrets_refused"
)

// SecretInjected notes that the proxy added secret name to a request to
// host:port at time at, for the record of the call then in flight.
func (s *Sandbox) SecretInjected(name, host string, port int, at time.Time) {
	s.secretUsed(name, host, port, at, false)
}

// SecretRefused notes that the proxy refused a request to host:port that
// carried secret name's placeholder: the call then in flight lists it,
// and its domain host:port as denied, though the connection was allowed.
func (s *Sandbox) SecretRefused(name, host string, port int, at time.Time) {
	s.secretUsed(name, host, port, at, true)
}

func (s *Sandbox) secretUsed(name, host string, port int, at time.Time, refused bool) {
	where := fmt.Sprintf("%s:%d", host, port)
	u := secretUse{at: at, name: name + "@" + where, where: where, refused: refused}
	s.mu.Lock()
	if len(s.secrets) >= maxTrackedConns {
		s.secrets = append(s.secrets[:0], s.secrets[len(s.secrets)-maxTrackedConns/2:]...)
	}
	s.secrets = append(s.secrets, u)
	s.mu.Unlock()
}

// secretsDuring adds to rec's Detail the secrets injected, and those
// refused, between start and end; it returns the HOST:PORTs of the
// refusals. Preconditions: s.mu is held.
func (s *Sandbox) secretsDuring(start, end time.Time, rec *audit.Record) map[string]bool {
	var names, refusedNames []string
	refused := map[string]bool{}
	for _, u := range s.secrets {
		if u.at.Before(start) || u.at.After(end) {
			continue
		}
		if u.refused {
			refused[u.where] = true
			if !slices.Contains(refusedNames, u.name) {
				refusedNames = append(refusedNames, u.name)
			}
		} else if !slices.Contains(names, u.name) {
			names = append(names, u.name)
		}
	}
	for key, list := range map[string][]string{DetailSecrets: names, DetailSecretsRefused: refusedNames} {
		if len(list) == 0 {
			continue
		}
		slices.Sort(list)
		if rec.Detail == nil {
			rec.Detail = map[string]string{}
		}
		rec.Detail[key] = strings.Join(list, ",")
	}
	return refused
}
